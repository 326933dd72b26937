#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deploy/partition/stages.h"
#include "graph/summary_graph.h"

namespace igb::runtime {
class InferenceModel;
}  // namespace igb::runtime

namespace igb::deploy {

/// How an exit's confidence in a sample is measured (docs/early-exit.md). Every criterion is a
/// score, higher = more confident; a sample leaves at the first early exit whose score reaches
/// that exit's threshold.
enum class ExitCriterion {
  /// The largest softmax probability (Shallow-Deep Networks): leaves when p_max ≥ q.
  kMaxSoftmax,
  /// The entropy of the softmax in nats (BranchyNet): leaves when H ≤ t (score −H).
  kEntropy,
  /// Distiller's rule, which reads the label: leaves when the cross-entropy against the true
  /// label is at most t (score −CE). For comparison only: no deployed model has the label.
  kLabelLoss,
};

/// "max-softmax", "entropy", "label-loss" (InputError naming --exit-criterion otherwise).
ExitCriterion parse_exit_criterion(const std::string& name);
std::string exit_criterion_name(ExitCriterion criterion);

/// Per-sample scores [N] of `logits` [N, C] (float32); `target` [N] only for kLabelLoss.
at::Tensor exit_scores(const at::Tensor& logits, ExitCriterion criterion,
                       const at::Tensor& target = {});
/// A score threshold in the criterion's own unit (q, nats) and back: −s for entropy and label
/// loss.
double natural_threshold(ExitCriterion criterion, double score_threshold);
double score_threshold(ExitCriterion criterion, double natural);

/// An early-exit network cut into segments, one per exit: segment e runs the ops not yet run
/// that exit e's activation needs, then exit e's head; the last segment runs the rest of the model
/// to its output. Segments replay the model's trace (StageRunner), so any DAG is cut correctly:
/// a tensor made before an exit and read after it (a skip connection) is carried to the segment
/// that reads it.
class ExitNetwork {
 public:
  /// `graph` is the summary graph of `model` (its backbone: heads are off while tracing); the
  /// exits are the model's activations with a head (Activation::attach_branch), in forward order.
  /// InputError when the model has none or an exit's activation is not an op of `graph`.
  /// Segments and heads run in their inference forms, with `int8` their quantized layers in
  /// integers (runtime/inference_model.h, InferenceOptions::int8).
  ExitNetwork(torch::nn::Module& model, const graph::SummaryGraph& graph, bool int8 = false);

  /// Exits, the final one included.
  size_t exits() const { return segments_.size(); }
  /// The exits' names: their activations ("layer1.2.relu2"), then "final".
  const std::vector<std::string>& exit_names() const { return names_; }
  /// MACs per sample of leaving at exit e: segments 0 … e and the heads of exits 0 … e.
  const std::vector<int64_t>& exit_macs() const { return exit_macs_; }
  /// MACs of each head alone (0 for the final exit).
  const std::vector<int64_t>& head_macs() const { return head_macs_; }
  /// MACs of the model's forward without exits (= exit_macs().back() less the heads).
  int64_t model_macs() const { return graph_->total_macs(); }
  const std::vector<Stage>& segments() const { return segments_; }
  /// Summary-graph value each early exit's head reads (the activation's output).
  const std::vector<int>& exit_values() const { return exit_values_; }
  torch::nn::Sequential head(size_t exit) const { return heads_.at(exit); }
  /// The summary graph of early exit `exit`'s head on its activation's output (batch 1).
  const graph::SummaryGraph& head_graph(size_t exit) const { return *head_graphs_.at(exit); }

  /// Every exit's logits (float32) for every sample of `x`, segment by segment.
  std::vector<at::Tensor> run_all(const at::Tensor& x) const;

  /// The deployed decision for each sample of `x`.
  struct Decision {
    /// [N] int64: the exit each sample left at.
    at::Tensor exit;
    /// [N, C] float32: the logits of that exit.
    at::Tensor logits;
  };
  /// Runs `x` as a deployed cascade: after each segment, the samples whose score reaches
  /// `score_thresholds[e]` leave with that exit's logits and only the others run on (the batch
  /// shrinks); every sample reaching the final exit leaves there. One threshold per early exit,
  /// in score units; `target` only for kLabelLoss.
  Decision run(const at::Tensor& x, ExitCriterion criterion,
               const std::vector<double>& score_thresholds, const at::Tensor& target = {}) const;

  /// The model's output through the same executor in one segment, no exits: the reference that
  /// latency is measured against.
  at::Tensor run_final_only(const at::Tensor& x) const;

 private:
  const graph::SummaryGraph* graph_;
  std::vector<Stage> segments_;
  std::vector<std::unique_ptr<StageRunner>> runners_;
  std::unique_ptr<StageRunner> whole_;
  // Running a head is not a change of the network (Sequential::forward is not const).
  mutable std::vector<torch::nn::Sequential> heads_;
  /// The heads' inference forms (runtime/), as the segments run; null where a head has none.
  std::vector<std::shared_ptr<runtime::InferenceModel>> head_forms_;
  std::vector<std::shared_ptr<const graph::SummaryGraph>> head_graphs_;
  std::vector<std::string> names_;
  std::vector<int> exit_values_;
  std::vector<int64_t> exit_macs_, head_macs_;
  /// Exit `e`'s logits for the activation `a` at its point.
  at::Tensor run_head(size_t e, const at::Tensor& a) const;
  /// Values each segment leaves that a later segment reads, per segment.
  std::vector<std::vector<int>> carried_;
};

}  // namespace igb::deploy
