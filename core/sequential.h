#pragma once

#include <torch/nn/modules/container/sequential.h>

namespace igb {

/// A torch::nn::Sequential with a concrete `forward(Tensor)`, so it can be nested inside another
/// Sequential (the stock one cannot: its forward is a template). Children are named "0", "1", …
/// exactly as in PyTorch.
class SequentialImpl : public torch::nn::SequentialImpl {
 public:
  using torch::nn::SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x) { return torch::nn::SequentialImpl::forward(std::move(x)); }
};

TORCH_MODULE(Sequential);

}  // namespace igb
