#include "deploy/serve/served_chain.h"

#include "deploy/partition/stages.h"

#include <algorithm>
#include <limits>

namespace igb::deploy {

void ServedChain::measure_traffic(const tools::SummaryGraph& graph,
                                  const std::vector<at::Tensor>& frames) {
  const std::vector<at::Tensor> sample(frames.begin(),
                                       frames.begin() + std::min<size_t>(frames.size(), 8));
  if (sample.size() >= 2) traffic = deploy::measure_traffic(graph, sample);
}

PartitionProblem ServedChain::problem(const tools::SummaryGraph& graph, bool later) const {
  ModelPartitionInputs in;
  in.precision = precision;
  in.costs = costs;
  if (!traffic.empty()) in.traffic = &traffic;
  in.differences = later && diff && in.traffic;
  return partition_problem(graph, devices, in);
}

SimulationResult ServedChain::simulate(const tools::SummaryGraph& graph,
                                       const Assignment& assignment, int frames,
                                       double rate_fps) const {
  SimulationOptions so;
  so.frames = frames;
  so.rate_fps = rate_fps;
  return simulate_pipeline(
      pipeline_servers(problem(graph, false), problem(graph, true), assignment), so);
}

ServedChain chain_without(const ServedChain& chain, const std::vector<int>& keep) {
  ServedChain out = chain;
  out.devices.devices.clear();
  out.devices.links.clear();
  out.costs.clear();
  for (size_t k = 0; k < keep.size(); ++k) {
    const auto d = static_cast<size_t>(keep[k]);
    out.devices.devices.push_back(chain.devices.devices.at(d));
    out.costs.push_back(chain.costs.at(d));
    if (k == 0) continue;
    LinkSpec link{std::numeric_limits<double>::infinity(), 0};
    for (auto l = static_cast<size_t>(keep[k - 1]); l < d; ++l) {
      link.bandwidth = std::min(link.bandwidth, chain.devices.links.at(l).bandwidth);
      link.latency_ms += chain.devices.links.at(l).latency_ms;
    }
    out.devices.links.push_back(link);
  }
  // The frames' source and the results' sink stay where they were when their device remains.
  const auto at = [&](int device, int otherwise) {
    const auto it = std::find(keep.begin(), keep.end(), device);
    return it == keep.end() ? otherwise : static_cast<int>(it - keep.begin());
  };
  out.devices.source = at(chain.devices.source, 0);
  out.devices.sink = at(chain.devices.sink, static_cast<int>(keep.size()) - 1);
  return out;
}

std::string Replan::summary() const {
  return changed || kept_for_empty_device
             ? "re-planned from the workers' measurements: " + std::to_string(moved) + " ops move"
             : "re-planned from the workers' measurements: the plan stays";
}

Replan replan_chain(const tools::SummaryGraph& graph, const ServedChain& chain,
                    const Assignment& assignment, const std::vector<std::string>& device_names,
                    const std::vector<WorkerInfo>& reports, PartitionObjective objective) {
  Replan r;
  r.chain = chain;
  r.assignment = assignment;
  const auto stages = split_stages(graph, assignment, device_names);
  for (size_t i = 0; i < stages.size() && i < reports.size(); ++i) {
    const auto& info = reports[i];
    const auto device = static_cast<size_t>(stages[i].device);
    auto& c = r.chain.costs.at(device);
    c.ms = info.costs;
    c.machine = info.machine;
    r.chain.devices.devices.at(device).speed = 1;
    if (i + 1 < stages.size() && info.send_ms > 0 && info.bytes_sent > 0 &&
        device < r.chain.devices.links.size())
      r.chain.devices.links[device].bandwidth =
          static_cast<double>(info.bytes_sent) / (info.send_ms / 1000.0);
  }
  const auto next = solve_partition(r.chain.problem(graph, true), objective).assignment;
  if (next == assignment) return r;
  for (size_t i = 0; i < next.size(); ++i) r.moved += next[i] != assignment[i] ? 1 : 0;
  if (split_stages(graph, next, device_names).size() != stages.size()) {
    r.kept_for_empty_device = true;
    return r;
  }
  r.assignment = next;
  r.changed = true;
  return r;
}

}  // namespace igb::deploy
