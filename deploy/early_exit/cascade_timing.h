// Scoring and timing an early-exit cascade on labelled batches (igb-tools early-exit;
// docs/early-exit.md, "Latency").
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deploy/early_exit/exit_calibration.h"
#include "deploy/early_exit/exit_network.h"

namespace igb::deploy {

/// Labelled batches held in memory: inputs [N, C, H, W] and their class indices [N].
struct LabelledBatches {
  std::vector<at::Tensor> inputs, targets;
  std::string description;
  int64_t size() const;
};

/// The same samples in batches of `batch`.
LabelledBatches rebatch(const LabelledBatches& set, int64_t batch);

/// Every exit's score and correctness on every sample of `set`.
ExitTable exit_table(const ExitNetwork& net, const LabelledBatches& set, ExitCriterion criterion);

/// What the cascade measured on a set: milliseconds per sample of the final exit alone, of the
/// cascade, and of the model's own forward pass; the samples whose exit differs from the one
/// expected.
struct CascadeTiming {
  double final_ms = 0, cascade_ms = 0, native_ms = 0;
  int64_t disagreements = 0;
};

/// Runs the cascade at `thresholds` on `set` and checks each sample leaves at `expected_exit`
/// (exit_of_samples of its table), then times the final exit alone, the cascade and `forward` (the
/// model's own), each the best of `repeats` passes over the set after two warm-up runs.
///
///   CascadeTiming t = time_cascade(net, forward, set, criterion, point.thresholds,
///                                  exit_of_samples(table, point.thresholds), 3);
CascadeTiming time_cascade(const ExitNetwork& net,
                           const std::function<at::Tensor(const at::Tensor&)>& forward,
                           const LabelledBatches& set, ExitCriterion criterion,
                           const std::vector<double>& thresholds,
                           const std::vector<int>& expected_exit, int repeats);

}  // namespace igb::deploy
