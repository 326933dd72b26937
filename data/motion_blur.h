#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// A straight motion blur kernel [size, size]: a segment of `length` pixels through the centre at
/// `angle_degrees` (0 = horizontal, counter-clockwise), drawn by bilinear splatting of points
/// every 1/8 pixel along it. Non-negative, sums to 1. `size` odd, length in [1, size].
at::Tensor linear_motion_kernel(int64_t size, double length, double angle_degrees);

/// A camera-shake kernel [size, size]: the path of a point moved by a random walk with inertia
/// (a velocity that keeps most of its direction from step to step, with random jolts), scaled to
/// `length` pixels of path, centred on its mean, and drawn by bilinear splatting. Non-negative,
/// sums to 1; determined by `seed`.
at::Tensor shake_motion_kernel(int64_t size, double length, uint64_t seed);

/// How synthetic blur is drawn.
struct MotionBlurOptions {
  /// Kernel side (odd): every kernel fits in it.
  int64_t kernel_size = 21;
  /// Path length in pixels, drawn uniformly in [min_length, max_length].
  double min_length = 3, max_length = 9;
  /// Share of straight kernels; the others are camera shake.
  double linear_share = 1;
  /// Gaussian noise sigma (on [0, 1]) drawn uniformly in [0, max_noise].
  double max_noise = 0.01;
};

/// A random kernel (straight at a random angle, or shake) as `options` say; determined by `seed`.
at::Tensor random_motion_kernel(uint64_t seed, const MotionBlurOptions& options = {});

/// The smallest centred square of `kernel` [k, k] (k odd) that holds all its non-zero taps: a 5×5
/// for a horizontal 5-pixel line in a 21×21 square.
at::Tensor support_of(const at::Tensor& kernel);

/// `image` [C, H, W] convolved with `kernel` [k, k] per channel, reflect-padded (same size). Only
/// the kernel's support_of is convolved: zero taps beyond it change nothing.
at::Tensor blur_image(const at::Tensor& image, const at::Tensor& kernel);

/// The synthetic blurred version of a sharp RGB image in [0, 1]: a random kernel, Gaussian noise,
/// clamped and rounded to 8 bits as a saved image would be. Determined by `seed`.
at::Tensor synthetic_motion_blur(const at::Tensor& sharp, uint64_t seed,
                                 const MotionBlurOptions& options = {});

}  // namespace igb::data
