#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// Renders one natural-looking synthetic RGB image, [3, H, W] in [0, 1], determined entirely by
/// `seed`: a smooth gradient background, patches of texture (stripes, checkers, smoothed noise),
/// filled and outlined shapes, lines and text, a mild camera blur and sensor noise. It has the
/// sharp edges, fine periodic detail and flat regions that super-resolution and deblurring learn
/// from, and is identical on every machine for a given seed.
at::Tensor render_synthetic_image(int64_t height, int64_t width, uint64_t seed);

}  // namespace igb::data
