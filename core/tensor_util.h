#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <vector>

namespace igb {

/// Number of elements of `t` that are exactly zero.
int64_t count_zeros(const at::Tensor& t);

/// Fraction in [0, 1] of the elements of `t` that are exactly zero (the fine-grained sparsity);
/// 0 for an empty tensor.
///
///   zero_fraction(torch::tensor({0.f, 1.f, 0.f, 2.f}))  // 0.5
double zero_fraction(const at::Tensor& t);

/// A 1-D int64 tensor of `indices` on `device`, for index_select / index_fill_ along one dim
/// (e.g. the filters a thinning keeps).
at::Tensor index_tensor(const std::vector<int64_t>& indices, c10::Device device = c10::kCPU);

/// torch::pixel_shuffle(x, r) and torch::pixel_unshuffle(x, r) of a 4-D tensor [N, C, H, W], the
/// same values and gradients, computed as a view, a permutation and one copy: LibTorch 1.13's own
/// CPU kernels index every element (channels-last support) and ran 2.5 times (shuffle) to 20
/// times (unshuffle) slower on DeblurGAN's feature maps (bench/deblur_step.cpp). Other ranks go
/// to LibTorch's.
at::Tensor fast_pixel_shuffle(const at::Tensor& x, int64_t r);
at::Tensor fast_pixel_unshuffle(const at::Tensor& x, int64_t r);

}  // namespace igb
