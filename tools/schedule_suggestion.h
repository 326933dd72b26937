#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace igb::tools {

/// A sensitivity sweep read back from sensitivity.csv (and the mode from sensitivity.json beside
/// it, when there).
struct SensitivityTable {
  std::vector<std::string> metrics;
  /// "element", "filter" or "channel".
  std::string mode = "element";
  /// Parameters in file order.
  std::vector<std::string> parameters;
  /// Parameter → (sparsity, metric values in `metrics` order), in file order.
  std::map<std::string, std::vector<std::pair<double, std::vector<double>>>> rows;
};

/// Reads sensitivity.csv ("parameter,sparsity,<metrics>"); InputError naming the file and line of
/// anything malformed.
SensitivityTable read_sensitivity_csv(const std::filesystem::path& csv);

/// What suggest_schedule writes.
/// The most epochs a run has (igb-train --epochs), so the latest a suggested policy may end.
inline constexpr int64_t kMaxEpochs = 1000000;

struct SuggestOptions {
  /// The largest drop of `metric` allowed per parameter (points, dB, or a loss increase).
  double max_drop = 0.3;
  /// The metric the budget is in; empty: the table's first (primary) one.
  std::string metric;
  /// "agp": an AGP pruner per group of parameters with the same final sparsity (element mode:
  /// AutomatedGradualPruner; filter and channel modes: L1RankedStructureParameterPruner_AGP with
  /// group_type Filters or Channels). "sensitivity": one SensitivityPruner (element mode only).
  std::string kind = "agp";
  /// The policy's epochs [start, end) and frequency.
  int64_t start_epoch = 0, end_epoch = 30, frequency = 1;
  /// Where AGP starts (capped at half the final sparsity).
  double initial_sparsity = 0.05;
  /// With kind "sensitivity": the weights by name, to turn each sparsity into Distiller's
  /// multiplier s of std(w) exactly (the quantile of |w| over std(w)); a weight not given uses the
  /// normal approximation s = √2·erfinv(sparsity).
  std::map<std::string, at::Tensor> weights;
  /// A line for the file's header (where the table came from).
  std::string source;
};

/// One parameter's choice.
struct SuggestedSparsity {
  std::string parameter;
  /// The highest sparsity of the sweep at which this and every lower level stay within the
  /// budget (0 when even the first level past 0 does not).
  double sparsity = 0;
  /// The metric's drop there (positive = worse) and its level-0 value.
  double drop = 0, baseline = 0;
};

struct ScheduleSuggestion {
  std::vector<SuggestedSparsity> choices;
  /// The schedule, Distiller's YAML layout, commented with each parameter's measured drop.
  std::string yaml;
};

/// Picks each parameter's sparsity within the budget and writes the schedule. The loss metric
/// ("loss") drops when it rises; every other metric when it falls. InputError for an unknown
/// metric or kind, a parameter without a level-0 row, epochs out of order or past kMaxEpochs, and
/// a budget no parameter can be pruned within (rather than a schedule that prunes nothing).
ScheduleSuggestion suggest_schedule(const SensitivityTable& table, const SuggestOptions& options);

}  // namespace igb::tools
