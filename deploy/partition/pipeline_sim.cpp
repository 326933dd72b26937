#include "deploy/partition/pipeline_sim.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace igb::deploy {

SimulationResult simulate_pipeline(const std::vector<PipelineServer>& servers,
                                   const SimulationOptions& options) {
  if (options.frames < 1) throw InputError("the simulation needs at least one frame");
  if (!(options.rate_fps >= 0) || !std::isfinite(options.rate_fps))
    throw InputError("the frame rate must be a finite number of 0 or more (0: back to back)");
  const int n = options.frames;
  const int m = static_cast<int>(servers.size());
  SimulationResult r;
  r.arrival_ms.resize(n);
  r.done_ms.resize(n);
  r.latency_ms.resize(n);
  std::vector<double> free_at(m, 0.0), busy(m, 0.0);
  for (int f = 0; f < n; ++f) {
    const double arrival = options.rate_fps > 0 ? 1000.0 * f / options.rate_fps : 0.0;
    double t = arrival;
    for (int s = 0; s < m; ++s) {
      const auto& server = servers[s];
      const double service = f == 0 ? server.first_ms : server.later_ms;
      ServerSpan span;
      span.frame = f;
      span.server = s;
      span.ready = t;
      span.start = std::max(t, free_at[s]);
      span.end = span.start + service;
      free_at[s] = span.end;
      busy[s] += service;
      t = span.end + (server.link ? server.latency_ms : 0.0);
      r.spans.push_back(span);
    }
    r.arrival_ms[f] = arrival;
    r.done_ms[f] = t;
    r.latency_ms[f] = t - arrival;
  }
  r.makespan_ms = *std::max_element(r.done_ms.begin(), r.done_ms.end()) - r.arrival_ms.front();
  r.throughput_fps = r.makespan_ms > 0 ? 1000.0 * n / r.makespan_ms : 0;
  const double steady = r.done_ms.back() - r.done_ms.front();
  r.steady_fps = n > 1 && steady > 0 ? 1000.0 * (n - 1) / steady : r.throughput_fps;
  for (double l : r.latency_ms) {
    r.mean_latency_ms += l / n;
    r.max_latency_ms = std::max(r.max_latency_ms, l);
  }
  for (int s = 0; s < m; ++s) {
    ServerStats st;
    st.name = servers[s].name;
    st.utilisation = r.makespan_ms > 0 ? busy[s] / r.makespan_ms : 0;
    // Waiting intervals [ready, start): +1 at each ready, -1 at each start.
    std::vector<std::pair<double, int>> events;
    double waited = 0;
    for (const auto& span : r.spans) {
      if (span.server != s || span.start <= span.ready) continue;
      events.push_back({span.ready, 1});
      events.push_back({span.start, -1});
      waited += span.start - span.ready;
    }
    std::sort(events.begin(), events.end());  // at equal times a start (-1) comes first
    int queue = 0;
    for (const auto& e : events) st.max_queue = std::max(st.max_queue, queue += e.second);
    st.mean_queue = r.makespan_ms > 0 ? waited / r.makespan_ms : 0;
    r.servers.push_back(st);
  }
  return r;
}

std::vector<PipelineServer> pipeline_servers(const PartitionProblem& first,
                                             const PartitionProblem& later,
                                             const Assignment& assignment) {
  const PlanCost a = evaluate(first, assignment);
  const PlanCost b = evaluate(later, assignment);
  if (!a.valid) throw InputError("cannot simulate an invalid plan: " + a.why_invalid);
  const int k = first.device_count();
  std::vector<int> nodes_on(k, 0);
  for (int d : assignment) ++nodes_on[d];
  std::vector<PipelineServer> out;
  for (int d = first.source; d < k; ++d) {
    if (nodes_on[d] > 0)
      out.push_back({first.devices[d], false, a.device_ms[d], b.device_ms[d], 0});
    if (d + 1 < k && a.forward_bytes[d] > 0)
      out.push_back({first.devices[d] + " -> " + first.devices[d + 1], true,
                     first.links[d].busy_ms(a.forward_bytes[d]),
                     later.links[d].busy_ms(b.forward_bytes[d]), first.links[d].latency_ms});
  }
  for (int l = k - 2; l >= 0; --l)
    if (a.backward_bytes[l] > 0)
      out.push_back({first.devices[l + 1] + " -> " + first.devices[l], true,
                     first.links[l].busy_ms(a.backward_bytes[l]),
                     later.links[l].busy_ms(b.backward_bytes[l]), first.links[l].latency_ms});
  return out;
}

tools::GanttChart gantt_chart(const std::vector<PipelineServer>& servers,
                              const SimulationResult& result, const std::string& title) {
  tools::GanttChart c;
  c.title = title;
  c.x_label = "time (ms)";
  for (const auto& s : servers) c.rows.push_back(s.name);
  for (const auto& span : result.spans)
    if (span.end > span.start)
      c.bars.push_back({span.server, span.start, span.end, span.frame, std::to_string(span.frame)});
  return c;
}

}  // namespace igb::deploy
