#pragma once

#include <cstdint>

#include "compress/thinning.h"

namespace igb::runtime {

/// How fastest_widths measures.
struct WidthSearchOptions {
  /// A wider candidate within this fraction of the fastest one's time counts as fast as it
  /// (the widest such is kept: its extra channels cost nothing on this machine).
  double tolerance = 0.03;
  /// Runs per timing (the median is taken) and timings per candidate (the fastest is kept).
  int repeats = 25;
  int rounds = 3;
};

/// A thinning width policy (compress/thinning.h) that measures: for each thinned tensor it
/// times, on the inference form (InferenceModel), every layer whose cost follows the width (the
/// convolutions and linear layers that write it and those that read it) at each candidate width
/// (the thinned width; the next multiples of 8, 16, 32 and 64; the dense width) with the other
/// dimensions as thinning leaves them, and keeps the fastest, preferring the widest among those
/// within `tolerance` of it. Layers are timed alone, on random weights, at the graph's input
/// shapes; a layer it cannot build (not two-dimensional, grouped) leaves the width as thinned.
/// Timings are kept per layer and shape, so asking again costs nothing.
compress::WidthPolicy fastest_widths(const WidthSearchOptions& options = {});

}  // namespace igb::runtime
