#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "tools/sensitivity.h"

namespace CLI {
class App;
}

namespace igb {
class Logger;
}

namespace igb::options {

/// How to sweep a checkpoint (igb-tools sensitivity, igb-test --summary sensitivity).
struct SensitivityArgs {
  std::string checkpoint, data = "synthetic", out;
  std::string mode = "element", levels = "0:0.95:0.05", params, metric;
  /// Batches of the optform's evaluation data (classify: 128 images; sr: one image); 0 = all.
  int64_t eval_batches = 4;
  bool with_dependencies = false;
};

/// Sweeps the checkpoint as `args` say with its optform's evaluation, with a progress line (a
/// status line on a terminal, a log line per tenth of the evaluations otherwise); prints a table
/// of the primary metric at a few levels per parameter and writes sensitivity.csv, .json, .svg
/// and .png into args.out.
tools::SensitivityResult sweep_checkpoint(const SensitivityArgs& args, const c10::Device& device,
                                          Logger& logger);

/// `igb-tools sensitivity` and `igb-tools suggest-schedule`.
class SensitivityCommands {
 public:
  explicit SensitivityCommands(CLI::App& app);
  /// Whether one of the two was given.
  bool parsed() const;
  /// Checks the output paths (before anything runs).
  void check_outputs() const;
  int run();

 private:
  int run_sweep();
  int run_suggest();

  CLI::App *sweep_ = nullptr, *suggest_ = nullptr;
  SensitivityArgs args_;
  int64_t threads_ = 0;
  std::string device_ = "cpu";
  // suggest-schedule
  std::string table_, suggest_out_, suggest_metric_, kind_ = "agp", epochs_, checkpoint_;
  double max_drop_ = 0.3;
  int64_t frequency_ = 1;
};

}  // namespace igb::options
