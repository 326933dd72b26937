// plan.json: the plans igb-tools partition found for a model on a chain of devices, as the
// serving master and library users read them back (docs/file-formats.md, plan.json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// One plan of the file: how it was found, what it costs, and its ops on each device.
struct PlanFileEntry {
  struct Device {
    std::string device;
    double ms = 0;
    int64_t param_bytes = 0;
    /// The ops of the summary graph this device runs, in graph order.
    std::vector<std::string> ops;
  };
  struct Link {
    std::string from, to;
    double forward_bytes = 0, forward_ms = 0, backward_bytes = 0, backward_ms = 0;
    /// The tensors crossing forward.
    std::vector<std::string> values;
  };
  std::string method;
  bool valid = true;
  std::string why_invalid;
  double latency_ms = 0, bottleneck_ms = 0, throughput_fps = 0;
  std::vector<Device> devices;
  std::vector<Link> links;
};

/// The simulation of the first plan the file records.
struct PlanFileSimulation {
  struct Server {
    std::string name;
    double utilisation = 0, mean_queue = 0;
    int64_t max_queue = 0;
  };
  int64_t frames = 0;
  double rate_fps = 0, first_latency_ms = 0, mean_latency_ms = 0, max_latency_ms = 0,
         throughput_fps = 0;
  std::vector<Server> servers;
};

/// The content of plan.json (format "igb partition plan", version 1). The first plan is the
/// optimal one; the rest are the baselines.
///
///   PlanFile plan = read_plan_file("plans/plan.json");
///   Assignment a = plan.assignment(graph);               // the optimal plan's ops per device
///   DevicesFile chain = load_devices_file(plan.devices_path());
struct PlanFile {
  static constexpr const char* kFormat = "igb partition plan";
  static constexpr int kVersion = 1;

  std::string model;
  graph::Shape input;
  /// The devices file the plan was made for, as given to igb-tools partition.
  std::string devices_file;
  /// "latency" or "throughput"; "fp32", "fp16" or "int8"; "full" or "diff".
  std::string objective = "latency", transfer = "fp32", mode = "full";
  std::vector<PlanFileEntry> plans;
  PlanFileSimulation simulation;
  /// Where the file was read from (empty for one made in memory).
  std::filesystem::path source;

  /// The optimal plan's op → device assignment over `graph`, devices numbered in chain order.
  /// InputError naming the file and the op when the plan names an op the graph does not have or
  /// leaves one out.
  Assignment assignment(const graph::SummaryGraph& graph) const;
  /// The optimal plan's device names in chain order.
  std::vector<std::string> device_names() const;
  /// The devices file: as recorded when it exists, else relative to the plan file's folder.
  std::filesystem::path devices_path() const;
};

/// A plan as the file records it: the problem's names for its devices, ops and links.
PlanFileEntry plan_file_entry(const PartitionProblem& problem, const PartitionPlan& plan);

/// The simulation's figures as the file records them.
PlanFileSimulation plan_file_simulation(const SimulationOptions& options,
                                        const SimulationResult& result);

nlohmann::json plan_file_json(const PlanFile& plan);
/// Strict: every key of the format with its type; InputError "FILE: plan.KEY …" otherwise. A file
/// without "format" and "version" (written before they were recorded) is read as version 1.
PlanFile plan_file_from_json(const nlohmann::json& j, const std::string& file);

/// Writes plan.json atomically.
void write_plan_file(const PlanFile& plan, const std::filesystem::path& path);
/// Reads plan.json; InputError naming the file when it is not one.
PlanFile read_plan_file(const std::filesystem::path& path);

}  // namespace igb::deploy
