#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace igb::deploy {

/// One op of the model as the planner sees it: its cost on every device of the chain.
struct PartitionNode {
  std::string name, type;
  /// Milliseconds of one frame (batch 1) on each device, in chain order; +infinity where the
  /// device cannot run it.
  std::vector<double> cost_ms;
  /// Bytes of the parameters and buffers the op reads (what a device holding it must store).
  int64_t param_bytes = 0;
};

/// A tensor that may cross a link: produced by one node (or the frame itself), read by others.
struct PartitionValue {
  std::string name;
  /// Producing node, or -1 for the frame (the model's input, which starts on the source device).
  int producer = -1;
  /// Reading nodes, each once.
  std::vector<int> consumers;
  /// A model output: it travels to the device results go to.
  bool output = false;
  /// Bytes sent when the value crosses a link (the chosen precision and encoding applied).
  double bytes = 0;
};

/// The link between device i and device i + 1 (both directions, each its own FIFO).
struct PartitionLink {
  /// Bytes per second.
  double bandwidth = 1e9;
  /// Milliseconds added to every message, whatever its size.
  double latency_ms = 0;
  /// Milliseconds of work every message costs whatever its size (encoding, the call, decoding),
  /// holding the link like its transmission.
  double message_ms = 0;
  /// Milliseconds to send `bytes` over the link: latency, the message's work and transmission; 0
  /// for nothing.
  double transfer_ms(double bytes) const { return bytes > 0 ? latency_ms + busy_ms(bytes) : 0.0; }
  /// Milliseconds the link is busy with `bytes`: the message's work and its transmission (the
  /// latency is propagation and does not hold the link).
  double busy_ms(double bytes) const {
    return bytes > 0 ? message_ms + 1000.0 * bytes / bandwidth : 0.0;
  }
};

/// A model (nodes in topological order, values) and a chain of devices to cut it across.
///
///   PartitionProblem p = ...;       // from a summary graph: partition_problem (graph_problem.h)
///   PlanCost c = evaluate(p, {0, 0, 1, 2});
struct PartitionProblem {
  std::string model;
  std::vector<PartitionNode> nodes;
  std::vector<PartitionValue> values;
  std::vector<std::string> devices;
  /// Bytes each device may hold; +infinity for no limit.
  std::vector<double> memory_bytes;
  /// devices.size() - 1 links, link i between device i and i + 1.
  std::vector<PartitionLink> links;
  /// Where frames start and where results go (device indices).
  int source = 0;
  int sink = 0;

  int device_count() const { return static_cast<int>(devices.size()); }
  /// Throws InputError when the problem is malformed: a consumer before its producer, a value
  /// read by nobody and not an output, cost lists of the wrong length, a bad source or sink.
  void check() const;
};

/// Node i runs on device assignment[i].
using Assignment = std::vector<int>;

/// What one frame costs under an assignment, by the stage model (docs/partition.md): every device
/// runs its stage once it has received the whole message of the link before it; a link sends one
/// message per direction per frame holding every value that crosses it.
struct PlanCost {
  /// Every edge moves forward along the chain (a value's readers run on its producer's device or
  /// later ones), no node runs before the source device, and every device's memory holds.
  bool valid = true;
  std::string why_invalid;
  /// One frame end to end: sum of the stages and the transfers.
  double latency_ms = 0;
  /// The slowest server (a device's stage, a link's transmission): the pipeline's period.
  double bottleneck_ms = 0;
  std::vector<double> device_ms;
  std::vector<int64_t> device_param_bytes;
  /// Per link: bytes and milliseconds (latency included) forward, and backward (results
  /// returning to a sink before their producer).
  std::vector<double> forward_bytes, backward_bytes;
  std::vector<double> forward_ms, backward_ms;
  /// Per link: the values crossing forward (names).
  std::vector<std::vector<std::string>> forward_values;
  /// Frames per second of the pipeline at its bottleneck.
  double throughput_fps() const { return bottleneck_ms > 0 ? 1000.0 / bottleneck_ms : 0; }
};

/// The cost of `assignment` computed directly from its definition (what the brute-force verifier
/// and every report use).
PlanCost evaluate(const PartitionProblem& problem, const Assignment& assignment);

enum class PartitionObjective {
  /// One frame's end-to-end latency; ties broken by the bottleneck.
  kLatency,
  /// The pipeline's period (slowest device or link); ties broken by latency.
  kThroughput,
};

/// "latency" / "throughput"; parse throws InputError naming the valid ones.
std::string objective_name(PartitionObjective o);
PartitionObjective parse_objective(const std::string& text);

/// True when `a` is strictly better than `b` for `objective` (relative tolerance 1e-9 on ties).
bool better(const PlanCost& a, const PlanCost& b, PartitionObjective objective);

/// A solved assignment and how it was found.
struct PartitionPlan {
  std::string method;
  Assignment assignment;
  PlanCost cost;
};

/// Every valid assignment, enumerated in node order with each node placed on its producers'
/// devices or later ones, costed by evaluate(): the optimum, and how many were tried. Throws
/// InputError when more than `max_assignments` would be enumerated.
struct BruteForceResult {
  PartitionPlan best;
  int64_t assignments = 0;
};
BruteForceResult brute_force_plan(const PartitionProblem& problem, PartitionObjective objective,
                                  int64_t max_assignments = 50'000'000);

}  // namespace igb::deploy
