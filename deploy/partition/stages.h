#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deploy/onnx/onnx_export.h"
#include "deploy/partition/partition_problem.h"
#include "graph/summary_graph.h"

namespace igb::runtime {
class InferenceStage;
}  // namespace igb::runtime

namespace igb::deploy {

/// The ops one device runs and the tensors it receives and sends (summary-graph value ids, in
/// ascending order; named as the ONNX export names them).
struct Stage {
  int index = 0;
  int device = 0;
  std::string device_name;
  std::vector<int> ops;
  /// Values the stage reads that it does not make: the frame, or outputs of earlier stages.
  std::vector<int> inputs;
  /// Values it makes that a later stage reads or that are model outputs.
  std::vector<int> outputs;
};

/// One stage per device that runs at least one op, in chain order.
std::vector<Stage> split_stages(const graph::SummaryGraph& graph, const Assignment& assignment,
                                const std::vector<std::string>& device_names);

/// Runs the ops of one stage in LibTorch by replaying the trace (SummaryGraph::jit_graph()) over
/// them alone, with the lookups from traced values to summary-graph values made once: for a
/// stage run many times (the early-exit evaluator, a serving worker). `graph` must outlive it.
class StageRunner {
 public:
  /// With `inference`, the stage runs in its inference form (runtime/inference_model.h: oneDNN
  /// kernels, BatchNorm folded, activations fused) on inputs of the graph's shapes, and by the
  /// trace's replay on any other; with `int8` too, its quantized layers in integers
  /// (InferenceOptions::int8).
  StageRunner(const graph::SummaryGraph& graph, Stage stage, bool inference = false,
              bool int8 = false);
  ~StageRunner();
  StageRunner(const StageRunner&) = delete;
  StageRunner& operator=(const StageRunner&) = delete;
  /// `values` must hold the stage's inputs; the stage's outputs are added to it. Throws
  /// InputError naming the op and the value when an input is missing.
  void run(std::map<int, at::Tensor>& values) const;
  const Stage& stage() const { return stage_; }

 private:
  struct Plan;
  void build_replay();
  const graph::SummaryGraph* graph_;
  Stage stage_;
  /// The nodes to run with their operators looked up once, and the slots they read and write.
  std::unique_ptr<Plan> plan_;
  /// The stage's inference form, when asked for.
  std::unique_ptr<runtime::InferenceStage> inference_;
};

/// StageRunner(graph, stage).run(values).
void run_stage(const graph::SummaryGraph& graph, const Stage& stage,
               std::map<int, at::Tensor>& values);

/// The model's first output for `input`, computed stage after stage.
at::Tensor run_stages(const graph::SummaryGraph& graph, const std::vector<Stage>& stages,
                      const at::Tensor& input);

/// Writes every stage as `stage<i>_<device>.onnx` into `dir` and a manifest (manifest.json: the
/// model, its input, per stage the device, file, op count and first and last op, inputs and
/// outputs with shapes and bytes in FP32); returns the manifest.
nlohmann::json export_stages(torch::nn::Module& model, const graph::SummaryGraph& graph,
                             const std::vector<Stage>& stages, const OnnxExportOptions& options,
                             const std::filesystem::path& dir);

}  // namespace igb::deploy
