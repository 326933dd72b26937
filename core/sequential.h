#pragma once

#include <torch/nn/modules/container/sequential.h>

namespace igb {

/// A torch::nn::Sequential with a concrete `forward(Tensor)`, so it can be nested inside another
/// Sequential (the stock one cannot: its forward is a template). Children are named "0", "1", …
/// exactly as in PyTorch. While a model is traced, each child's ops carry the child's dotted name
/// as their scope (core/trace_scope.h), so parameter-free children (pooling, flatten) are named
/// in the summary graph.
class SequentialImpl : public torch::nn::SequentialImpl {
 public:
  using torch::nn::SequentialImpl::SequentialImpl;
  torch::Tensor forward(torch::Tensor x);
};

TORCH_MODULE(Sequential);

}  // namespace igb
