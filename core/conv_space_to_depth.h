#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

namespace igb {

/// A stride-1 convolution without padding ("valid"), computed on a space-to-depth view of its
/// input: `x` is cut into `block`×`block` pixel cells that become channels (pixel_unshuffle), each
/// of the block² output phases gets its own output channels, and the kernel is rearranged to
/// match, with zeros where a phase's taps fall outside it; a pixel shuffle puts the phases back.
/// The result equals torch::conv2d(x, weight, bias) up to float rounding, and gradients reach
/// `x`, `weight` and `bias`. Worth it for a large kernel with few output channels, which oneDNN
/// pads to a block of 16: DeblurGAN's last 7×7 convolution (16 → 3 channels) ran 1.7 times as
/// fast, forward and backward together, with block 2 (bench/deblur_step.cpp).
at::Tensor conv2d_space_to_depth(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, int64_t block = 2);

/// Whether fast_conv2d takes the space-to-depth path for `layer`: stride, dilation and groups 1,
/// zero padding, at most 4 output channels and a kernel of at least 7×7. Elsewhere the stock
/// operator was as fast or faster (a 3×3 kernel: 0.8 times as fast).
bool space_to_depth_pays(const torch::nn::Conv2dImpl& layer);

/// Runs `layer` on `x` through conv2d_space_to_depth where space_to_depth_pays, else as
/// layer.forward; while tracing, always the stock operator, so the summary graph, MAC counts and
/// ONNX export see one real Conv.
at::Tensor fast_conv2d(torch::nn::Conv2dImpl& layer, const at::Tensor& x);

}  // namespace igb
