#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace igb::options {

/// One run of a bench plan: what `igb-train` is given, under a name.
struct BenchRun {
  std::string name;
  std::string optform, model, data, compress;
  /// 0: the optform's default.
  int64_t epochs = 0;
  /// Further igb-train options, in order: ("lr", "0.01"), ("model-arg", "ngf=16"); an empty value
  /// is a flag.
  std::vector<std::pair<std::string, std::string>> options;
  /// The plan's line of the run (messages).
  std::string where;

  /// igb-train's arguments after the program name, without --out and --resume.
  std::vector<std::string> train_args() const;
};

/// A plan: runs sharing defaults, and how latency is measured.
struct BenchPlan {
  std::string file, title;
  std::vector<BenchRun> runs;
  /// The second batch size latency is measured at (the first is 1), and timed runs per size.
  int64_t latency_batch = 8, latency_repeats = 5;
};

/// Reads a plan (docs/igb-bench.md): `title`, `defaults` (optform, model, data, epochs, compress,
/// options), `latency` (batch_size, repeats) and `runs`, a list of the same keys plus `name`.
/// A relative `compress` path is relative to the plan's folder. Errors name file:line.
BenchPlan load_bench_plan(const std::string& file);

}  // namespace igb::options
