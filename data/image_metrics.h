#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// PSNR in dB between two images with values in [0, 1] ([C, H, W] or [H, W]), ignoring `shave`
/// pixels at every border: 10·log10(1 / MSE). Identical images give +infinity.
double psnr(const at::Tensor& a, const at::Tensor& b, int64_t shave = 0);

/// SSIM (Wang et al. 2004) of two single-channel images in [0, 1] ([1, H, W] or [H, W]), on the
/// 0–255 scale: 11×11 Gaussian window with σ = 1.5, K1 = 0.01, K2 = 0.03, valid region only, mean
/// of the map; `shave` border pixels are ignored first.
double ssim(const at::Tensor& a, const at::Tensor& b, int64_t shave = 0);

}  // namespace igb::data
