#pragma once

#include <torch/nn/module.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "graph/summary_graph.h"
#include "tools/report.h"

namespace igb::tools {

struct ProfileOptions {
  std::vector<int64_t> batch_sizes = {1};
  /// Rows of the operators table.
  int top = 10;
  /// Untimed runs before measuring, and timed runs (medians are reported).
  int warmup = 2;
  int repeats = 5;
  /// Time the model's inference form (runtime/inference_model.h), as igb runs it deployed, for
  /// the layers' and the model's forward latency: a step's time goes to the op it is named after
  /// (a fused chain's layer), 0 to the ops folded or fused into it, a layout change's to the op
  /// whose output it converts. Forward + backward stay LibTorch's (training). Off: each traced op
  /// alone in LibTorch.
  bool inference = false;
  /// With `inference`: the form runs the quantized layers in integers (InferenceOptions::int8).
  bool int8 = false;
};

/// Cost of one op of the summary graph at one batch size.
struct LayerCost {
  std::string name, type;
  graph::Shape output;
  int64_t output_bytes = 0;
  /// Median latency of the op alone: forward (no grad), and forward then backward with its
  /// inputs and parameters requiring grad.
  double forward_ms = 0, forward_backward_ms = 0;
};

/// One row of the operators table, as PyTorch's profiler aggregates it (key_averages).
struct OperatorStat {
  std::string name;
  int64_t calls = 0;
  double self_us = 0, total_us = 0;
};

struct BatchProfile {
  int64_t batch = 1;
  /// Whole model: median forward latency (eval, no grad) and forward + backward of sum(output).
  double forward_ms = 0, forward_backward_ms = 0;
  std::vector<LayerCost> layers;
  /// Every operator seen in one profiled forward + backward, by self time, largest first.
  std::vector<OperatorStat> operators;
  double profiled_self_us = 0;
};

struct ModelProfile {
  std::string model;
  graph::Shape input;  // batch 1
  int threads = 1;
  /// What the forward latencies time: "inference form", "INT8 inference form" or "eager".
  std::string runtime = "eager";
  std::vector<BatchProfile> batches;
  /// Chrome trace (chrome://tracing, Perfetto) of the profiled passes: one process per batch
  /// size, layer spans ("layer") around the operators they ran ("operator").
  nlohmann::json chrome_trace;
};

/// Profiles `model` at each batch size: per-layer latency and output bytes by running the traced
/// graph op by op, then one forward + backward under LibTorch's profiler for the operators table
/// and the trace. The model's training mode, gradients and weights are left as they were.
ModelProfile profile_model(torch::nn::Module& model, const graph::Shape& input_shape,
                           const graph::SummaryGraph::Forward& forward,
                           const std::string& model_name, const ProfileOptions& options,
                           const std::function<void(const std::string&)>& progress = {});

/// Per batch size: the layers table and the top-`top` operators table.
std::vector<Report> profile_reports(const ModelProfile& profile, int top);
/// {"model", "input", "threads", "batches": [{"batch", "forward_ms", "forward_backward_ms",
/// "layers": [...], "operators": [...]}]}.
nlohmann::json profile_json(const ModelProfile& profile);

}  // namespace igb::tools
