#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace igb {

/// Number of elements of `t` that are exactly zero.
int64_t count_zeros(const at::Tensor& t);

/// Fraction in [0, 1] of the elements of `t` that are exactly zero (the fine-grained sparsity);
/// 0 for an empty tensor.
///
///   zero_fraction(torch::tensor({0.f, 1.f, 0.f, 2.f}))  // 0.5
double zero_fraction(const at::Tensor& t);

/// A shape for messages: "[8x3x64x64]".
std::string shape_text(c10::IntArrayRef sizes);

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

/// Geometric self-ensemble of an image-to-image function (Timofte et al. 2016, "Seven ways to
/// improve example-based single image super resolution"; EDSR+): the mean of `f` over the eight
/// flips and transposes of `x` [N, C, H, W], each output mapped back by the inverse transform.
/// `f` must accept both orientations of a non-square input and return [N, C', H·s, W·s] for
/// an input [N, C, H, W] (s = 1 for restoration, the scale for super-resolution). Transform t
/// flips the width if bit 0 is set, the height if bit 1 is, then swaps them if bit 2 is; t = 0
/// is `f(x)` itself. Another rank is an InputError.
at::Tensor geometric_self_ensemble(const std::function<at::Tensor(const at::Tensor&)>& f,
                                   const at::Tensor& x);

}  // namespace igb
