// A served chain as the planner and the simulator see it, and re-planning it from what its workers
// measured (igb-serve master --replan; docs/serving.md).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deploy/partition/devices_file.h"
#include "deploy/partition/graph_problem.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "deploy/serve/serve_master.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// The devices and links of a chain, each device's op costs, and the tensors' measured zeros:
/// what a plan is made and simulated from.
///
///   ServedChain chain{load_devices_file(plan.devices_path()), costs, {}, precision, diff};
///   chain.measure_traffic(graph, frames);
///   SimulationResult predicted = chain.simulate(graph, plan.assignment(graph), 30, 0);
struct ServedChain {
  DevicesFile devices;
  /// One cost file per device, in chain order.
  std::vector<LayerCosts> costs;
  /// Zero ratios of the graph's tensors on real frames (empty: tensors sent dense).
  std::map<int, ValueTraffic> traffic;
  TransferPrecision precision = TransferPrecision::kFp32;
  /// Frames after the first are sent as differences.
  bool diff = false;
  /// The served chain's hops as probed (set_hops; empty: not measured): what they add to the
  /// devices file's links, and the master's two hops, its frame to the first stage and the
  /// results' way back, which the devices file does not have.
  std::vector<HopCost> hops;
  /// The stage each hop enters (hops[i + 1] enters stage_devices[i + 1]); the last stage's device
  /// sends the results.
  std::vector<int> stage_devices;
  /// Machines shared by several processes (host_cores[h] cores each): the machine of each device
  /// and of the master. Empty: every device and the master on its own.
  std::vector<int> host_cores, device_host;
  int master_host = -1;
  /// What serving frames cost the processes (set_serving; frames 0: not measured), and the
  /// waits a frame served one at a time had beyond those costs, ms (spread over the hops).
  ServingCosts serving;
  double serving_wait_ms = 0;
  /// The share of each process's work a frame besides computing that is on the frame's path (the
  /// rest runs beside it, on the same cores), set so that the simulator's latency one at a time
  /// is the measured one (1 when even all of it leaves a wait).
  double serving_path_share = 1;

  /// Measures `traffic` on the first 8 of `frames` (as igb-tools partition --frames-from); fewer
  /// than two frames leave it empty.
  void measure_traffic(const graph::SummaryGraph& graph, const std::vector<at::Tensor>& frames);
  /// The planner's problem for the first frame (whole tensors) or a later one.
  PartitionProblem problem(const graph::SummaryGraph& graph, bool later) const;
  /// Takes the probed hops of a plan whose stages run on `stage_devices`: the link into each
  /// stage's device holds a message for the hop's CPU work (message_ms), its bandwidth is the
  /// devices file's in series with the hop's CPU per byte, and its latency at least what the
  /// probes took beyond their work (HopCost::propagation_ms); the master's hops are simulated too.
  void set_hops(const std::vector<HopCost>& probed, const std::vector<int>& stage_devices);
  /// Groups the devices by the machine their workers reported (WorkerInfo::host; `workers[i]`
  /// ran on device `devices[i]`) with the master's (`master_host`, this process's): devices on
  /// one machine share its cores in the simulation.
  void set_hosts(const std::vector<WorkerInfo>& workers, const std::vector<int>& devices,
                 const std::string& master_host_id, int master_cores);
  /// Takes what serving frames cost (ServeMaster::measure_serving on the plan `assignment`,
  /// stages on `stage_devices`): each stage computes for its measured CPU, each process's other
  /// work a frame (receiving, decoding, encoding, sending, its threads waking) is the CPU of the
  /// hop it sends on, both back to back and, added to a frame that finds its server idle, what
  /// one at a time cost more. Of that work, serving_path_share holds the frame and the rest runs
  /// beside it: the share that makes the simulated latency one at a time the measured one, or,
  /// where all of it leaves the latency short, all, and the rest (serving_wait_ms) spread over
  /// the hops as propagation.
  void set_serving(const ServingCosts& costs, const std::vector<int>& stage_devices,
                   const graph::SummaryGraph& graph, const Assignment& assignment);
  /// The simulator's figures for `assignment` with `frames` frames at `rate_fps` (0: back to back).
  SimulationResult simulate(const graph::SummaryGraph& graph, const Assignment& assignment,
                            int frames, double rate_fps) const;
};

/// `chain` with only the devices `keep` (indices, in chain order; the devices of the workers that
/// remain after others were lost): a link between two kept devices is the series of the links
/// between them (the slowest bandwidth, the latencies added); the first and last kept device are
/// the source and the sink.
ServedChain chain_without(const ServedChain& chain, const std::vector<int>& keep);

/// MasterOptions::replan for `chain` served by `workers` (addresses in chain order; worker i runs
/// on device `worker_device[i]`, named in `device_names`): `objective` solved again on the devices
/// of the workers that remain, with their costs and the links between them in series
/// (chain_without). `graph` and `chain` are read when a worker is lost, so they must outlive the
/// function; a chain changed meanwhile (re-planned) is the one planned around.
std::function<Failover(const std::vector<int>& alive)> failover_planner(
    const graph::SummaryGraph& graph, const ServedChain& chain, std::vector<int> worker_device,
    std::vector<std::string> device_names, PartitionObjective objective,
    std::vector<std::string> workers);

/// What re-planning found.
struct Replan {
  /// The chain as measured: each device's op costs from its worker's machine (speed 1), each
  /// link's bandwidth from the bytes its sender moved and the time they took.
  ServedChain chain;
  /// The plan to serve on: the new one, or the old one when nothing changed or the new one left a
  /// device without ops.
  Assignment assignment;
  bool changed = false;
  /// Ops the solver's plan moves to another device.
  int moved = 0;
  /// The solver's plan left a device without ops, so the old plan (and the old chain) stays.
  bool kept_for_empty_device = false;
  /// One line for the log: how many ops the solver's plan moves.
  std::string summary() const;
};

/// Re-plans `assignment` of `graph` on `chain` from the reports of the workers serving it (one per
/// stage of the current plan, in chain order; igb-serve master --replan), for `objective`.
Replan replan_chain(const graph::SummaryGraph& graph, const ServedChain& chain,
                    const Assignment& assignment, const std::vector<std::string>& device_names,
                    const std::vector<WorkerInfo>& reports, PartitionObjective objective);

}  // namespace igb::deploy
