// The planner's problem built from a model's summary graph and a chain of devices.
#pragma once

#include <map>
#include <vector>

#include "deploy/partition/devices_file.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/partition_problem.h"
#include "deploy/partition/traffic.h"
#include "deploy/partition/transfer_size.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// What partition_problem builds a problem from.
struct ModelPartitionInputs {
  /// One cost file per device, in chain order (each device's speed factor applied on top).
  std::vector<LayerCosts> costs;
  TransferPrecision precision = TransferPrecision::kFp32;
  /// Measured zero ratios: with them a tensor is sent sparse where that is smaller.
  const std::map<int, ValueTraffic>* traffic = nullptr;
  /// Size the tensors of a later frame: differences from the previous frame (needs traffic).
  bool differences = false;
};

/// The planner's problem for `graph` on the chain of `devices`: a node per op (its cost on each
/// device = the device's cost file / its speed), a value per tensor crossing between ops (the
/// frame and every op output), with bytes as sent. Throws InputError when a cost file does not
/// match the graph.
PartitionProblem partition_problem(const graph::SummaryGraph& graph, const DevicesFile& devices,
                                   const ModelPartitionInputs& inputs);

/// Refuses, before any cost is measured, a chain whose memory limits hold no assignment of the
/// graph's parameters (whatever the costs turn out to be): InputError naming the model, its
/// parameter bytes and the limits'. Solves the problem with every cost zero, so memory is the
/// only thing that can make it infeasible; a graph with more cut sets than the exact planner
/// takes is left to the planner's own refusal.
void check_memory_fits(const graph::SummaryGraph& graph, const DevicesFile& devices);

}  // namespace igb::deploy
