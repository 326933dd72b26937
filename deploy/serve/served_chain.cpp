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

void ServedChain::set_hops(const std::vector<HopCost>& probed, const std::vector<int>& stages) {
  hops = probed;
  stage_devices = stages;
  for (size_t i = 1; i < stages.size() && i < probed.size(); ++i) {
    const int into = stages[i];
    if (into < 1 || into > static_cast<int>(devices.links.size())) continue;
    auto& link = devices.links[static_cast<size_t>(into - 1)];
    // The message's work holds the link; its bytes take the wire's time and the software's, one
    // after the other; what the probes took beyond the work is propagation.
    link.message_ms = probed[i].cpu_ms;
    link.bandwidth = 1.0 / (1.0 / link.bandwidth + probed[i].cpu_ms_per_mb * 1e-9);
    link.latency_ms = std::max(link.latency_ms, probed[i].propagation_ms());
  }
}

void ServedChain::set_hosts(const std::vector<WorkerInfo>& workers, const std::vector<int>& devs,
                            const std::string& master_host_id, int master_cores) {
  std::vector<std::string> ids;
  host_cores.clear();
  const auto host = [&](const std::string& id, int cores) {
    const auto it = std::find(ids.begin(), ids.end(), id);
    if (it != ids.end()) return static_cast<int>(it - ids.begin());
    ids.push_back(id);
    host_cores.push_back(std::max(1, cores));
    return static_cast<int>(ids.size()) - 1;
  };
  master_host = host(master_host_id, master_cores);
  device_host.assign(devices.devices.size(), -1);
  for (size_t i = 0; i < workers.size() && i < devs.size(); ++i)
    device_host.at(static_cast<size_t>(devs[i])) = host(workers[i].host, workers[i].cores);
  for (auto& h : device_host)
    if (h < 0) h = host("device " + std::to_string(&h - device_host.data()), 1);
}

namespace {

/// A hop's CPU: `bytes` of the first frame and of later ones need that much of a core, and the
/// hop is busy at least as long.
void hop_cpu(PipelineServer& s, const HopCost& hop, double first_bytes, double later_bytes) {
  s.cpu_first_ms = first_bytes > 0 ? hop.cpu(first_bytes) : 0;
  s.cpu_later_ms = later_bytes > 0 ? hop.cpu(later_bytes) : 0;
  s.first_ms = std::max(s.first_ms, s.cpu_first_ms);
  s.later_ms = std::max(s.later_ms, s.cpu_later_ms);
}

/// The server of a master's hop: `bytes` of the first frame and of later ones.
PipelineServer master_hop(const std::string& name, const HopCost& hop, double first_bytes,
                          double later_bytes, int device) {
  PipelineServer s;
  s.name = name;
  s.link = true;
  s.device = device;
  s.first_ms = hop.busy_ms(first_bytes);
  s.later_ms = hop.busy_ms(later_bytes);
  s.latency_ms = hop.propagation_ms();
  hop_cpu(s, hop, first_bytes, later_bytes);
  return s;
}

/// Bytes of the frame (the model's input as the master sends it) in `p`.
double frame_bytes(const PartitionProblem& p) {
  double bytes = 0;
  for (const auto& v : p.values)
    if (v.producer < 0) bytes += v.bytes;
  return bytes;
}

}  // namespace

SimulationResult ServedChain::simulate(const tools::SummaryGraph& graph,
                                       const Assignment& assignment, int frames,
                                       double rate_fps) const {
  SimulationOptions so;
  so.frames = frames;
  so.rate_fps = rate_fps;
  const auto first = problem(graph, false), later = problem(graph, true);
  auto servers = pipeline_servers(first, later, assignment);
  if (!hops.empty() && !assignment.empty()) {
    const int head = *std::min_element(assignment.begin(), assignment.end());
    const int tail = *std::max_element(assignment.begin(), assignment.end());
    double results = 0;  // the results go back whole, in float32
    for (int v : graph.outputs()) {
      double n = 1;
      for (int64_t d : graph.shape(v)) n *= static_cast<double>(d);
      results += 4 * n;
    }
    const auto a = evaluate(first, assignment), b = evaluate(later, assignment);
    for (auto& s : servers) {
      if (!s.link || s.backward) continue;
      // The hop into the stage on the device after the link.
      const auto into = std::find(stage_devices.begin(), stage_devices.end(), s.link_index + 1);
      const auto hop = static_cast<size_t>(into - stage_devices.begin());
      if (into == stage_devices.end() || hop >= hops.size()) continue;
      const auto l = static_cast<size_t>(s.link_index);
      hop_cpu(s, hops[hop], a.forward_bytes[l], b.forward_bytes[l]);
    }
    servers.insert(servers.begin(), master_hop("master -> " + first.devices[head], hops.front(),
                                               frame_bytes(first), frame_bytes(later), -1));
    servers.push_back(
        master_hop(first.devices[tail] + " -> master", hops.back(), results, results, tail));
  }
  if (!host_cores.empty()) {
    so.host_cores = host_cores;
    for (auto& s : servers)
      s.host = s.device < 0 ? master_host : device_host.at(static_cast<size_t>(s.device));
  }
  return simulate_pipeline(servers, so);
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
      const auto& part = chain.devices.links.at(l);
      link.bandwidth = std::min(link.bandwidth, part.bandwidth);
      link.latency_ms += part.latency_ms;
      // One message, sent once from the first kept device to the next.
      link.message_ms = std::max(link.message_ms, part.message_ms);
    }
    out.devices.links.push_back(link);
  }
  if (!chain.device_host.empty()) {
    out.device_host.clear();
    for (int d : keep) out.device_host.push_back(chain.device_host.at(static_cast<size_t>(d)));
  }
  out.stage_devices.clear();
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
        device < r.chain.devices.links.size()) {
      // The link's time less its messages' work (probed) is its bytes' time.
      auto& link = r.chain.devices.links[device];
      const double bytes_ms =
          info.send_ms - link.message_ms * static_cast<double>(std::max<int64_t>(info.frames, 0));
      if (bytes_ms > 0) link.bandwidth = static_cast<double>(info.bytes_sent) / (bytes_ms / 1000.0);
    }
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
