// A stage worker of igb-serve (docs/serving.md): holds one model, runs the stage a master gives it
// (or the segment of a cascade its command line names) with the stage executor, and passes the
// outputs to the next worker or answers with them.
#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

#include "deploy/early_exit/exit_network.h"
#include "deploy/partition/transfer_size.h"
#include "deploy/serve/link_emulation.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

struct WorkerOptions {
  /// HOST:PORT; port 0 picks a free one (start() returns it).
  std::string listen = "127.0.0.1:0";
  /// Threads running stages; 1 runs frames one at a time in arrival order, as a cascade unit does.
  int compute_threads = 1;
  /// The link to the next worker (emulated in this sender).
  LinkEmulation link;
  /// A slower machine than this one, emulated: each stage takes 1 / compute_speed times as long
  /// (the worker sleeps the difference, holding its compute thread), and the per-op costs it
  /// reports are divided by it, as a devices file's `speed` divides a cost file. In (0, 1].
  double compute_speed = 1;
  /// Run the stages' quantized layers in integers (InferenceOptions::int8; a model trained with
  /// a quantizer).
  bool int8 = false;
  /// Frames the worker holds at most, queued for its compute threads (and as many waiting for
  /// the next worker): beyond that a delivery waits for room, up to the plan's timeout, so an
  /// overloaded chain holds back its sender instead of growing (0: no limit).
  int max_queue = 0;
};

/// A cascade unit's part (docs/serving.md#cascades): segment `unit` of the model's exit network
/// and, for an early exit, its head; it answers when the exit's score passes `score_threshold`
/// (exit_scores' units, higher is more confident), else forwards to `next`.
struct CascadeUnit {
  int unit = 0;
  ExitCriterion criterion = ExitCriterion::kMaxSoftmax;
  /// Score units; ignored on the last segment, which always answers.
  double score_threshold = 0;
  std::string next;
  TransferPrecision precision = TransferPrecision::kFp32;
  double timeout_ms = 10000;
};

/// A digest (CRC-32C, 8 hex digits) of every parameter and buffer of `model` by name: workers and
/// master compare it, so a chain never mixes two trainings of the same architecture.
std::string weights_digest(torch::nn::Module& model);

class StageWorker {
 public:
  /// `model` and `graph` must outlive the worker; `forward` runs the whole model (per-op costs
  /// measured on request).
  StageWorker(torch::nn::Module& model, const graph::SummaryGraph& graph,
              graph::SummaryGraph::Forward forward, WorkerOptions options);
  ~StageWorker();
  StageWorker(const StageWorker&) = delete;
  StageWorker& operator=(const StageWorker&) = delete;

  /// Makes this worker a cascade unit (before start()); `net` must outlive it. InputError when
  /// the unit is not a segment of `net`.
  void set_cascade(const ExitNetwork& net, const CascadeUnit& unit);
  /// Listens; returns the address bound. InputError when it cannot listen.
  std::string start();
  /// Blocks until shutdown().
  void wait();
  void shutdown();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace igb::deploy
