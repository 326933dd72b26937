#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

namespace igb {

/// Transposed convolution computed as one ordinary convolution followed by a pixel shuffle
/// ("sub-pixel" form): each of the stride² output phases is a correlation of the input with a
/// sub-kernel taken from every stride-th tap of the flipped kernel. The result equals
/// torch::conv_transpose2d (up to float rounding) and gradients reach the original weight and
/// bias; on CPU it is an order of magnitude faster for the few-output-channel, large-kernel
/// layers of SR models (FSRCNN's 9×9 stride-3 output layer). Groups and dilation other than 1
/// fall back to torch::conv_transpose2d.
at::Tensor conv_transpose2d_subpixel(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef output_padding);

/// Runs `layer` on `x` through conv_transpose2d_subpixel, except while tracing, where the stock
/// operator is recorded so the summary graph, MAC counts and ONNX export see a real
/// ConvTranspose.
at::Tensor fast_conv_transpose2d(torch::nn::ConvTranspose2dImpl& layer, const at::Tensor& x);

}  // namespace igb
