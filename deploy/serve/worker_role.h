// What a stage worker runs, its role: one stage of a master's plan or one unit of a cascade, and
// how each is built and checked. Internal to deploy/serve/ (it names the generated protocol).
#pragma once

#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "deploy/early_exit/exit_network.h"
#include "deploy/partition/stages.h"
#include "deploy/serve/link_sender.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/wire.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// A stage of a master's plan, as its Configure call gave it.
struct PipelineStageRole {
  uint32_t plan_number = 0;
  /// Frames come as differences (--mode diff): every input goes through its decoder.
  bool diff = false;
  /// The next worker's address ("" on the last stage).
  std::string next;
};

/// A unit of a cascade, as StageWorker::set_cascade gave it.
struct CascadeUnitRole {
  /// The unit's exit (null on the cascade's final segment, which always answers).
  torch::nn::Sequential head{nullptr};
  int exit_value = -1;
  ExitCriterion criterion = ExitCriterion::kMaxSoftmax;
  double score_threshold = 0;
};

/// Frames hold the role they were accepted under, so a new plan does not disturb frames in
/// flight.
struct WorkerRole {
  std::variant<PipelineStageRole, CascadeUnitRole> kind;
  /// The stage's index in its plan, or the unit's in its cascade.
  int stage = 0;
  std::unique_ptr<StageRunner> runner;
  /// Values received and values passed on (or answered with, on the last stage), by name.
  std::vector<std::pair<std::string, int>> inputs, outputs;
  double timeout_ms = 10000;
  /// The link to the next worker (null where the role always answers).
  std::unique_ptr<LinkSender> sender;
  /// The receiving side of --mode diff: the tensor each input name holds, and the last seq taken
  /// (FrameDecoder's, under its lock).
  std::map<std::string, DiffDecoder> decoders;
  int64_t last_seq = -1;

  PipelineStageRole* pipeline() { return std::get_if<PipelineStageRole>(&kind); }
  const PipelineStageRole* pipeline() const { return std::get_if<PipelineStageRole>(&kind); }
  CascadeUnitRole* cascade() { return std::get_if<CascadeUnitRole>(&kind); }
  const CascadeUnitRole* cascade() const { return std::get_if<CascadeUnitRole>(&kind); }
  /// Whether every input is decoded as a difference stream (a cascade's never is).
  bool diff() const { return pipeline() && pipeline()->diff; }
};

/// Makes the link to the next worker `next`, named `who` in messages.
using SenderFactory = std::function<std::unique_ptr<LinkSender>(
    const std::string& next, const std::string& who, TransferPrecision precision, bool diff,
    double timeout_ms)>;

/// The first line of an error, without LibTorch's "[file:line]" location.
std::string error_line(const std::exception& e);

/// A request refused for what it holds (INVALID_ARGUMENT), saying `what`.
grpc::Status refuse(const std::string& what);

/// Fills `role`'s inputs, outputs and runner from the stage of a master's plan `req`, checked
/// against `graph` (`value_ids`: its values by ONNX name); a refusal names what does not fit.
grpc::Status build_pipeline_stage(const graph::SummaryGraph& graph,
                                  const std::map<std::string, int>& value_ids, bool int8,
                                  const proto::StageConfig& req, WorkerRole& role);

/// The role of cascade unit `unit` of `net`, with its link to the next unit from `make_sender`.
/// InputError when the unit is not a segment of `net`, or a segment before the last has no next.
std::shared_ptr<WorkerRole> build_cascade_unit(const graph::SummaryGraph& graph,
                                               const ExitNetwork& net, const CascadeUnit& unit,
                                               bool int8, const SenderFactory& make_sender);

/// Runs a new role's stage (and exit head) once on zeros: the first frame does not pay for
/// LibTorch's first-run work (kernel choice, workspace allocation), which the simulator's
/// per-op costs exclude too (they are timed after warm-up runs).
void warm_up(const graph::SummaryGraph& graph, WorkerRole& role);

}  // namespace igb::deploy
