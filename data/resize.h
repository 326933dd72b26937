#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// Weights of MATLAB's `imresize(..., 'bicubic')` along one dimension, as a dense
/// [out_len, in_len] matrix: cubic kernel with a = -0.5, widened by 1/scale when shrinking
/// (antialiasing), borders by symmetric reflection, each row summing to one.
at::Tensor bicubic_resize_matrix(int64_t in_len, int64_t out_len, double scale);

/// MATLAB-compatible bicubic resize of a [..., H, W] float tensor by `scale` (output size
/// ceil(H·scale) × ceil(W·scale)). Values are not clamped or rounded.
at::Tensor imresize(const at::Tensor& image, double scale);

/// Resize to an explicit size with the scale taken from the ratio of sizes.
at::Tensor imresize_to(const at::Tensor& image, int64_t out_h, int64_t out_w);

}  // namespace igb::data
