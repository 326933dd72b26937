#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace igb {

/// Zero-pads the channel dimension (dim 1): `before` zero channels, the input, `after` zero
/// channels — the option-A shortcut of CIFAR ResNets. A module rather than a free function so
/// thinning can change how many padded channels are left (`set_padding`) and the summary graph
/// names the op.
class ChannelPadImpl : public torch::nn::Module {
 public:
  ChannelPadImpl(int64_t before, int64_t after) : before_(before), after_(after) {}
  torch::Tensor forward(const torch::Tensor& x);
  int64_t before() const { return before_; }
  int64_t after() const { return after_; }
  void set_padding(int64_t before, int64_t after) {
    before_ = before;
    after_ = after;
  }

 private:
  int64_t before_, after_;
};

TORCH_MODULE(ChannelPad);

}  // namespace igb
