#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/conv.h>

#include <vector>

namespace igb {

/// The ordinary convolution a stride-s transposed convolution becomes in the sub-pixel form: its
/// output, pixel-shuffled by s and cropped, is the transposed convolution's.
struct SubpixelConv {
  /// (cout·s², cin, ⌈kh/s⌉, ⌈kw/s⌉): every s-th tap of the flipped kernel per output phase.
  at::Tensor weight;
  /// The bias repeated for each of the s² phases (undefined when there is none).
  at::Tensor bias;
  /// Zero padding of the input, in constant_pad_nd's order {left, right, top, bottom}.
  std::vector<int64_t> pad;
  /// Where the transposed convolution's output starts in the shuffled one, and its size.
  int64_t crop_y = 0, crop_x = 0, out_h = 0, out_w = 0;
};

/// The sub-pixel convolution of a transposed convolution (groups 1, dilation 1, stride s both
/// ways) with `weight` (cin, cout, kh, kw) on an input of h×w.
SubpixelConv subpixel_conv(const at::Tensor& weight, const at::Tensor& bias, int64_t s,
                           at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t h,
                           int64_t w);

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
