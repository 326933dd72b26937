#include "deploy/serve/served_chain.h"

#include "deploy/partition/stages.h"

#include <algorithm>
#include <limits>

namespace igb::deploy {

void ServedChain::measure_traffic(const graph::SummaryGraph& graph,
                                  const std::vector<at::Tensor>& frames) {
  const std::vector<at::Tensor> sample(frames.begin(),
                                       frames.begin() + std::min<size_t>(frames.size(), 8));
  if (sample.size() >= 2) traffic = deploy::measure_traffic(graph, sample);
}

PartitionProblem ServedChain::problem(const graph::SummaryGraph& graph, bool later) const {
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

/// The measured serving costs on `servers`: a stage's compute, and the rest of a process's work
/// a frame on the hop it sends on (the master's on its hop to the first stage), `path_share` of
/// it before the frame goes on and the rest left behind; `wait_ms` spread over the hops.
void apply_serving(std::vector<PipelineServer>& servers, const ServingCosts& costs,
                   const std::vector<int>& stage_devices, double path_share, double wait_ms) {
  const auto& busy = costs.back_to_back;
  const auto& idle = costs.one_at_a_time;
  // One at a time, a process slept for about a frame's latency before each frame.
  const double idle_for = idle.latency_ms;
  const auto set = [idle_for](PipelineServer& s, double cpu, double cpu_idle, double share) {
    s.cpu_first_ms = s.cpu_later_ms = share * cpu;
    s.first_ms = std::max(s.first_ms, s.cpu_first_ms);
    s.later_ms = std::max(s.later_ms, s.cpu_later_ms);
    s.idle_ms = share * std::max(0.0, cpu_idle - cpu);
    s.idle_full_ms = idle_for;
    s.background_ms = (1 - share) * cpu;
  };
  int hops = 0;
  for (const auto& s : servers) hops += s.link && !s.backward ? 1 : 0;
  for (auto& s : servers) {
    if (s.backward) continue;
    if (s.link) s.latency_ms += wait_ms / std::max(hops, 1);
    if (s.link && s.device < 0) {
      set(s, busy.master_cpu_ms, idle.master_cpu_ms, path_share);
      continue;
    }
    const auto it = std::find(stage_devices.begin(), stage_devices.end(), s.device);
    const auto i = static_cast<size_t>(it - stage_devices.begin());
    if (it == stage_devices.end() || i >= busy.worker_cpu_ms.size() ||
        i >= idle.worker_cpu_ms.size())
      continue;
    if (s.link)
      set(s, std::max(0.0, busy.worker_cpu_ms[i] - busy.compute_cpu_ms[i]),
          std::max(0.0, idle.worker_cpu_ms[i] - idle.compute_cpu_ms[i]), path_share);
    else
      set(s, busy.compute_cpu_ms[i], idle.compute_cpu_ms[i], 1);
  }
}

/// Bytes of the frame (the model's input as the master sends it) in `p`.
double frame_bytes(const PartitionProblem& p) {
  double bytes = 0;
  for (const auto& v : p.values)
    if (v.producer < 0) bytes += v.bytes;
  return bytes;
}

}  // namespace

SimulationResult ServedChain::simulate(const graph::SummaryGraph& graph,
                                       const Assignment& assignment, int frames,
                                       double rate_fps) const {
  SimulationOptions so;
  so.frames = frames;
  so.rate_fps = rate_fps;
  const auto first = problem(graph, false), later = problem(graph, true);
  auto servers = pipeline_servers(first, later, assignment);
  if ((!hops.empty() || serving.frames > 0) && !assignment.empty()) {
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
    const HopCost none;
    servers.insert(servers.begin(), master_hop("master -> " + first.devices[head],
                                               hops.empty() ? none : hops.front(),
                                               frame_bytes(first), frame_bytes(later), -1));
    servers.push_back(master_hop(first.devices[tail] + " -> master",
                                 hops.empty() ? none : hops.back(), results, results, tail));
  }
  if (serving.frames > 0)
    apply_serving(servers, serving, stage_devices, serving_path_share, serving_wait_ms);
  if (!host_cores.empty()) {
    so.host_cores = host_cores;
    for (auto& s : servers)
      s.host = s.device < 0 ? master_host : device_host.at(static_cast<size_t>(s.device));
  }
  return simulate_pipeline(servers, so);
}

void ServedChain::set_serving(const ServingCosts& costs, const std::vector<int>& stages,
                              const graph::SummaryGraph& graph, const Assignment& assignment) {
  serving = costs;
  stage_devices = stages;
  serving_path_share = 1;
  serving_wait_ms = 0;
  const double measured = costs.one_at_a_time.latency_ms;
  if (costs.frames < 1 || !(measured > 0)) return;
  // Frames far apart, as one at a time: the latency the costs make with a share of the
  // processes' other work on the frame's path, the share found by bisection (the latency grows
  // with it).
  const auto alone = [&](double share) {
    serving_path_share = share;
    return simulate(graph, assignment, costs.frames, 1000.0 / (4 * measured)).mean_latency_ms;
  };
  if (const double all = alone(1); all <= measured) {
    serving_wait_ms = measured - all;
  } else if (alone(0) >= measured) {
    serving_path_share = 0;
  } else {
    double lo = 0, hi = 1;
    for (int i = 0; i < 30; ++i) (alone((lo + hi) / 2) < measured ? lo : hi) = (lo + hi) / 2;
    serving_path_share = (lo + hi) / 2;
  }
  // The planner's links: the sending process's work a frame (back to back) is its message's.
  for (size_t i = 1; i < stages.size() && i - 1 < costs.back_to_back.worker_cpu_ms.size(); ++i) {
    const int into = stages[i];
    if (into < 1 || into > static_cast<int>(devices.links.size())) continue;
    devices.links[static_cast<size_t>(into - 1)].message_ms = std::max(
        0.0, costs.back_to_back.worker_cpu_ms[i - 1] - costs.back_to_back.compute_cpu_ms.at(i - 1));
  }
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
  // Measured on the chain as it was.
  out.serving = ServingCosts();
  out.serving_wait_ms = 0;
  // The frames' source and the results' sink stay where they were when their device remains.
  const auto at = [&](int device, int otherwise) {
    const auto it = std::find(keep.begin(), keep.end(), device);
    return it == keep.end() ? otherwise : static_cast<int>(it - keep.begin());
  };
  out.devices.source = at(chain.devices.source, 0);
  out.devices.sink = at(chain.devices.sink, static_cast<int>(keep.size()) - 1);
  return out;
}

std::function<Failover(const std::vector<int>&)> failover_planner(
    const graph::SummaryGraph& graph, const ServedChain& chain, std::vector<int> worker_device,
    std::vector<std::string> device_names, PartitionObjective objective,
    std::vector<std::string> workers) {
  return [&graph, &chain, worker_device = std::move(worker_device),
          device_names = std::move(device_names), objective,
          workers = std::move(workers)](const std::vector<int>& alive) {
    std::vector<int> keep;
    std::vector<std::string> names;
    for (int w : alive) {
      keep.push_back(worker_device.at(static_cast<size_t>(w)));
      names.push_back(device_names.at(static_cast<size_t>(keep.back())));
    }
    const auto reduced = chain_without(chain, keep);
    const auto assignment = solve_partition(reduced.problem(graph, true), objective).assignment;
    Failover f;
    f.stages = split_stages(graph, assignment, names);
    for (const auto& st : f.stages) {
      const int w = alive.at(static_cast<size_t>(st.device));
      f.workers.push_back(w);
      f.description += (f.description.empty() ? "" : ", ") + st.device_name + " on " +
                       workers.at(static_cast<size_t>(w)) + ": " + std::to_string(st.ops.size()) +
                       " ops";
    }
    f.description = std::to_string(f.stages.size()) + " stages (" + f.description + ")";
    return f;
  };
}

std::string Replan::summary() const {
  return changed || kept_for_empty_device
             ? "re-planned from the workers' measurements: " + std::to_string(moved) + " ops move"
             : "re-planned from the workers' measurements: the plan stays";
}

Replan replan_chain(const graph::SummaryGraph& graph, const ServedChain& chain,
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
