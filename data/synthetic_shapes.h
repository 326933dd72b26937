#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace igb::data {

/// Names of the ten classes of the synthetic shapes dataset, by label.
const std::vector<std::string>& synthetic_shape_classes();

/// Renders one image of class `label` (0–9) as uint8 [3, size, size], determined by `seed`: the
/// shape in a random colour, position, scale and rotation on a random gradient background, with
/// clutter strokes in other colours and sensor noise. Learnable, but not at a glance.
at::Tensor render_synthetic_shape(int64_t label, int64_t size, uint64_t seed);

}  // namespace igb::data
