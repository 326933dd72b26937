#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// Renders one dead-leaves image, [3, H, W] in [0, 1], determined entirely by `seed`: opaque
/// discs, ellipses and rectangles dropped one over another until they cover the image, their
/// radii drawn from the scale-invariant law p(r) ∝ r⁻³ between one pixel and half the image
/// side, some filled with texture (stripes, smoothed noise, a gradient) instead of a flat
/// colour, then an occasional depth-of-field blur and mild sensor noise. Images of this model
/// share the edge and scale statistics of photographs, which is why restoration networks trained
/// on them come close to those trained on natural images (Achddou, Gousseau and Ladjal, "Synthetic
/// images as a regularity prior for image restoration neural networks", SSVM 2021).
at::Tensor render_dead_leaves(int64_t height, int64_t width, uint64_t seed);

}  // namespace igb::data
