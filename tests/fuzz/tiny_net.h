// The model of the checkpoint fuzz target and its seed: one small convolution.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>

namespace igb::fuzz {

struct TinyNet : torch::nn::Module {
  TinyNet() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 3)));
  }
  torch::nn::Conv2d conv{nullptr};
};

}  // namespace igb::fuzz
