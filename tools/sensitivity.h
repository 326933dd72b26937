#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "graph/summary_graph.h"

namespace igb::tools {

/// What one-shot pruning a sensitivity sweep applies to each parameter.
enum class SensitivityMode {
  /// Distiller's level pruner: the given fraction of the smallest |w| of the weight.
  kElement,
  /// L1-ranked filters (output channels) of a 4-D weight.
  kFilter,
  /// L1-ranked input channels of a 4-D weight.
  kChannel,
};

/// "element", "filter", "channel"; InputError naming the valid ones otherwise.
SensitivityMode parse_sensitivity_mode(const std::string& s);
std::string sensitivity_mode_name(SensitivityMode m);

/// The most levels one sweep takes.
inline constexpr int64_t kMaxSensitivityLevels = 1000;

/// Levels "FROM:TO:STEP" (inclusive of TO within a rounding slack, as 0:0.95:0.05 gives 20 levels)
/// or a comma-separated list; each in [0, 1). InputError naming the text otherwise.
std::vector<double> parse_sensitivity_levels(const std::string& text);

///   sensitivity_sweep(model, graph, SensitivityOptions().mode(SensitivityMode::kFilter)
///                         .levels({0, 0.5}).with_dependencies(true), evaluate);
struct SensitivityOptions {
  TORCH_ARG(SensitivityMode, mode) = SensitivityMode::kElement;
  /// Pruning levels, each in [0, 1).
  TORCH_ARG(std::vector<double>, levels) = {};
  /// ECMAScript regex a parameter name must match somewhere (empty: every eligible weight).
  TORCH_ARG(std::string, params) = "";
  /// kFilter only: also zero what thinning would remove with each filter: its bias, the norm
  /// entries after it, the filters tied to it by residual adds and concats, and the consumers'
  /// input channels (compress::channel_group). A filter whose group thinning could not remove
  /// (it reaches the model's input or output) is still zeroed with its group.
  TORCH_ARG(bool, with_dependencies) = false;
};

/// Named metric values, in the evaluator's order (the first is the primary metric).
using SensitivityMetrics = std::vector<std::pair<std::string, double>>;

struct SensitivityRow {
  std::string parameter;
  /// The level asked for.
  double level = 0;
  /// The pruned parameter's actual fraction of zeros at that level.
  double sparsity = 0;
  SensitivityMetrics metrics;
};

struct SensitivityResult {
  SensitivityMode mode = SensitivityMode::kElement;
  bool with_dependencies = false;
  std::vector<std::string> parameters;
  std::vector<double> levels;
  /// The metric names (from the first evaluation).
  std::vector<std::string> metrics;
  /// The unpruned model's metrics.
  SensitivityMetrics baseline;
  /// Parameters × levels, parameter-major.
  std::vector<SensitivityRow> rows;
  /// Evaluations run (1 + rows) and the wall time of the whole sweep and of the evaluations.
  int64_t evaluations = 0;
  double seconds = 0, evaluation_seconds = 0;
};

/// The weights a sweep in `options`' mode prunes: the 2-D and 4-D weights of the graph's conv,
/// transposed conv and linear ops (4-D only for filter and channel modes) matching options.params,
/// in graph order. InputError when none is left or the regex is bad.
std::vector<std::string> sensitivity_parameters(const torch::nn::Module& model,
                                                const graph::SummaryGraph& graph,
                                                const SensitivityOptions& options);

/// Called before each evaluation: parameter ("" for the baseline), level, evaluations done, total.
using SensitivityProgress =
    std::function<void(const std::string& parameter, double level, int64_t done, int64_t total)>;

/// InputError when `options` cannot make a sweep (no level; with_dependencies outside kFilter),
/// for a caller to check before it loads and evaluates anything; sensitivity_sweep checks too.
void check_sensitivity_options(const SensitivityOptions& options);

/// For each parameter and each level: prunes one-shot (no fine-tuning), runs `evaluate` (which
/// must see the same data in the same order each time), then puts back every tensor it changed,
/// bit for bit, before the next one. No gradients are kept.
SensitivityResult sensitivity_sweep(torch::nn::Module& model, const graph::SummaryGraph& graph,
                                    const SensitivityOptions& options,
                                    const std::function<SensitivityMetrics()>& evaluate,
                                    const SensitivityProgress& progress = {});

/// `parameter,sparsity,<metrics...>` with one row per parameter and level.
std::string sensitivity_csv(const SensitivityResult& r);
nlohmann::json sensitivity_json(const SensitivityResult& r);

/// Writes sensitivity.csv, sensitivity.json, and the plot of `metric` (default the primary one)
/// against sparsity, one line per parameter, as sensitivity.svg and sensitivity.png, atomically,
/// into `dir`. Returns the paths written.
std::vector<std::filesystem::path> write_sensitivity(const SensitivityResult& r,
                                                     const std::filesystem::path& dir,
                                                     const std::string& metric = "");

}  // namespace igb::tools
