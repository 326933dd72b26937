#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "data/image.h"
#include "tools/sensitivity.h"

namespace igb {
class Logger;
}

namespace igb::options {

/// How to sweep a checkpoint (igb-tools sensitivity, igb-test --summary sensitivity).
struct SensitivityArgs {
  std::string checkpoint, data = "synthetic", out;
  std::string mode = "element", levels = "0:0.95:0.05", params, metric;
  /// Batches of the family's evaluation data (classify: 128 images; sr, deblur: one image);
  /// 0 = all.
  int64_t eval_batches = 4;
  bool with_dependencies = false;
  /// The largest image read, in pixels (--max-image-pixels).
  int64_t max_image_pixels = data::kDefaultMaxImagePixels;
};

/// Sweeps the checkpoint as `args` say with its family's evaluator, with a progress line (a
/// status line on a terminal, a log line per tenth of the evaluations otherwise); prints a table
/// of the primary metric at a few levels per parameter and writes sensitivity.csv, .json, .svg
/// and .png into args.out.
tools::SensitivityResult sweep_checkpoint(const SensitivityArgs& args, const c10::Device& device,
                                          Logger& logger);

}  // namespace igb::options
