// The master of a partitioned serving chain (docs/serving.md): configures one worker per stage
// of a plan, sends frames down the chain, collects the results and measures what the chain did.
#pragma once

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deploy/partition/stages.h"
#include "deploy/partition/transfer_size.h"
#include "deploy/serve/link_emulation.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// A plan on the workers that remain after some were lost: `workers[k]` (an index into
/// MasterOptions::workers) runs `stages[k]`; `description` says it in one line.
struct Failover {
  std::vector<int> workers;
  std::vector<Stage> stages;
  std::string description;
};

struct MasterOptions {
  /// weights_digest() of the model the plan runs (the workers must hold the same).
  std::string weights;
  /// One address per stage, in chain order.
  std::vector<std::string> workers;
  /// Where results come back (HOST:PORT, port 0 picks one), and the address the last worker is
  /// told to send them to (default: the bound address).
  std::string listen = "127.0.0.1:0";
  std::string advertise;
  TransferPrecision precision = TransferPrecision::kFp32;
  /// Frames after the first as differences from the previous frame (--mode diff).
  bool diff = false;
  /// A frame whose result has not come back this long after it was sent fails the run, ms.
  double timeout_ms = 10000;
  /// Frames per second sent; 0 sends them back to back.
  double rate_fps = 0;
  /// Frames sent and not yet answered at most (0: no limit). 1 sends each frame when the last
  /// one's result is back.
  int max_in_flight = 0;
  /// The link from the master to the first worker (emulated; the plan's frames start there).
  LinkEmulation link;
  /// Frames that link holds at most, queued or being delivered (0: no limit): beyond that the
  /// next frame waits, as a worker's --max-queue holds back its sender.
  int max_queue = 0;
  /// With `rate_fps`: a frame that cannot be sent within this many ms of its time under the rate
  /// (the link full) is dropped and counted instead (0: every frame is sent, however late).
  double drop_late_ms = 0;
  /// When set, a lost worker (unreachable, or not answering a report within a quarter of the
  /// timeout) does not end the run: the master asks every worker of the chain for a report,
  /// calls this with those that answer (indices into `workers`, in chain order), configures the
  /// plan it returns, re-sends every frame whose result has not come back (under new ids: a late
  /// result of an old one is dropped, so no frame is answered twice) and goes on. Unset: the run
  /// ends with the error, naming the worker.
  std::function<Failover(const std::vector<int>& alive)> replan;
  /// With `replan`: a lost worker that answers a report again (asked as often as the chain's
  /// workers are while frames wait) is taken back: the plan is made again with it and the
  /// frames not answered are re-sent, as when it was lost.
  bool rejoin = false;
};

/// One lost-worker recovery of ServeMaster::serve (MasterOptions::replan).
struct FailoverEvent {
  /// What was seen ("worker A could not pass frame 12 to worker B: ..."), and the workers lost
  /// or, with MasterOptions::rejoin, taken back.
  std::string cause;
  std::vector<std::string> lost, rejoined;
  /// The plan it went on with (Failover::description).
  std::string plan;
  /// The first frame without a result then, and how many frames were re-sent.
  int frame = 0, resent = 0;
  /// When the failure was seen and when the new plan was configured, ms from the first send.
  double detected_ms = 0, resumed_ms = 0;
};

/// What one stage did, summed over the frames.
struct StageTotals {
  std::string worker;
  double compute_ms = 0, queue_ms = 0;
  /// The CPU time of compute_ms (without the time the stage waited for a core).
  double compute_cpu_ms = 0;
  int64_t bytes_in = 0, bytes_out = 0;
};

struct ServeResult {
  /// Per frame, in order: send time and result time from the first send, ms.
  std::vector<double> sent_ms, done_ms, latency_ms;
  std::vector<std::vector<at::Tensor>> outputs;
  /// The stage (a cascade's unit) that answered each frame, and its exit's score.
  std::vector<int> answered_by;
  std::vector<double> score;
  /// Non-empty where a cascade unit answered from its own exit because the next unit was lost:
  /// why (proto Result.fallback).
  std::vector<std::string> fallback;
  std::vector<StageTotals> stages;
  /// Bytes on each link: [0] master → first worker, [i] stage i-1 → stage i; first frame and the
  /// rest.
  std::vector<int64_t> link_bytes_first, link_bytes_later;
  double mean_latency_ms = 0, max_latency_ms = 0;
  /// Frames between the first and the last completion over that time (the simulator's steady
  /// throughput).
  double steady_fps = 0;
  /// Lost workers the run recovered from, and the results that arrived for a frame already
  /// re-sent (dropped).
  std::vector<FailoverEvent> failovers;
  int late_results_dropped = 0;
  /// Per frame, 1 where MasterOptions::drop_late_ms dropped it unsent (no outputs, no latency),
  /// and how many.
  std::vector<char> dropped;
  int dropped_count = 0;
};

/// The values each link carries for `stages` (by value id): link i joins stage i and i + 1;
/// the last entry is what the last stage answers with (the model's outputs).
std::vector<std::vector<int>> stage_links(const graph::SummaryGraph& graph,
                                          const std::vector<Stage>& stages);

/// One hop of a configured chain as probed (ServeMaster::probe_hops): the time a message takes
/// there and back whatever its size, and the time its bytes add (encoding, copies, the wire,
/// decoding), from the median times of messages of one value and of 256 Ki values (16 Ki on a
/// slow link); and the CPU time both ends spend on them, the same way.
struct HopCost {
  std::string from, to;
  double message_ms = 0, ms_per_mb = 0;
  double cpu_ms = 0, cpu_ms_per_mb = 0;
  /// The ms a message of `bytes` takes there and back, and the CPU ms it costs.
  double ms(double bytes) const { return message_ms + ms_per_mb * bytes / 1e6; }
  double cpu(double bytes) const { return cpu_ms + cpu_ms_per_mb * bytes / 1e6; }
  /// What of a message's time is neither work nor its bytes: half of it there, half back.
  double propagation_ms() const { return std::max(0.0, message_ms - cpu_ms) / 2; }
  /// How long a message of `bytes` holds the hop: its work, or its bytes' time after the
  /// propagation, whichever is longer.
  double busy_ms(double bytes) const {
    return std::max(cpu(bytes), std::min(message_ms, cpu_ms) + ms_per_mb * bytes / 1e6);
  }
};

/// What serving a frame costs the chain's processes, measured by serving frames
/// (ServeMaster::measure_serving) in two ways: one at a time (each sent when the last one's
/// result is back: every process wakes for it) and back to back (each finds the next waiting).
struct ServingCosts {
  struct Way {
    /// Per frame: the CPU of the master's process and of each worker's (chain order), all its
    /// threads, and of each stage's compute (a part of its worker's), ms.
    double master_cpu_ms = 0;
    std::vector<double> worker_cpu_ms, compute_cpu_ms;
    /// Mean latency of the frames, ms.
    double latency_ms = 0;
  };
  Way one_at_a_time, back_to_back;
  /// Frames served each way.
  int frames = 0;
};

/// What a worker says of itself (its Report, without measuring).
struct WorkerInfo {
  std::string model, fingerprint, machine;
  /// The machine it runs on (host name and boot id) and the cores it may use.
  std::string host;
  int cores = 0;
  /// The CPU time its process has used so far, ms.
  double cpu_ms = 0;
  std::vector<int64_t> input_shape;
  std::string input_name;
  bool cascade = false;
  int stage = 0;
  int64_t frames = 0, errors = 0, bytes_sent = 0;
  double compute_ms = 0, send_ms = 0;
  /// With `measure_costs`: every op's forward time on the worker's machine, ms.
  std::map<std::string, double> costs;
};

/// Asks the worker at `address` for its report, waiting up to `timeout_ms` for it to come up.
/// An error in our words when it does not answer.
WorkerInfo worker_report(const std::string& address, double timeout_ms, bool measure_costs = false);

/// InputError unless `workers` addresses serve `stages` (one worker a stage), naming both counts
/// and the stages' devices; checked before a master measures or connects anything.
void check_worker_count(size_t workers, const std::vector<Stage>& stages);

class ServeMaster {
 public:
  /// `graph` must outlive the master.
  ServeMaster(const graph::SummaryGraph& graph, MasterOptions options);
  /// A master of a chain it does not configure (a cascade, each unit set up by its own command
  /// line): attach() instead of configure().
  explicit ServeMaster(MasterOptions options);
  ~ServeMaster();
  ServeMaster(const ServeMaster&) = delete;
  ServeMaster& operator=(const ServeMaster&) = delete;

  /// Gives worker i stage i (plan `number`). An error naming the worker when one is unreachable,
  /// holds another model or refuses the stage.
  void configure(const std::vector<Stage>& stages, uint32_t number);
  /// Times every hop of the configured chain with `messages` probes of each size: [0] the master
  /// to the first worker, [i] worker i - 1 to worker i, and last the last worker's results to
  /// the master. An error naming the hop when one fails.
  std::vector<HopCost> probe_hops(int messages = 20);
  /// Serves `frames` one at a time and then again back to back on the configured chain and
  /// measures what a frame costs each process (ServingCosts). The frames count as a stream:
  /// configure the plan again (a new number) before serving another.
  ServingCosts measure_serving(const std::vector<at::Tensor>& frames);
  /// Sends to the first worker as it is, frames holding one tensor named `input_name`.
  void attach(const std::string& input_name);
  /// Sends `frames` (each the model's input, batch 1) down the chain and collects every result.
  /// When a worker fails, stops answering reports (asked every quarter of the timeout while a
  /// frame waits), or no result comes back within the timeout: with MasterOptions::replan, goes
  /// on without the lost workers (ServeResult::failovers); without, throws one line naming the
  /// worker and the frame. `progress` (may be empty) is called after each result.
  ServeResult serve(const std::vector<at::Tensor>& frames,
                    const std::function<void(int done, int total)>& progress = {});

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace igb::deploy
