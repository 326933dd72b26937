#include "deploy/partition/pipeline_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <limits>
#include <queue>

#include "core/error.h"

namespace igb::deploy {

namespace {

double service_of(const PipelineServer& s, int frame) {
  return frame == 0 ? s.first_ms : s.later_ms;
}

/// Utilisation and queue of server `s` from the simulation's spans.
ServerStats server_stats(const SimulationResult& r, const PipelineServer& server, int s,
                         double busy) {
  ServerStats st;
  st.name = server.name;
  st.utilisation = r.makespan_ms > 0 ? busy / r.makespan_ms : 0;
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
  return st;
}

}  // namespace

namespace {

/// The event loop of simulate_pipeline: frames becoming ready at servers and servers finishing
/// a frame, and between events the CPU work in progress on each host, shared by its cores.
class PipelineRun {
 public:
  PipelineRun(const std::vector<PipelineServer>& servers, const SimulationOptions& options,
              SimulationResult& r)
      : servers_(servers), options_(options), r_(r), state_(servers.size()) {
    active_.resize(options.host_cores.size());
    for (const auto& s : servers)
      if (s.host >= static_cast<int>(options.host_cores.size()))
        throw InputError("server '" + s.name + "' runs on a host the simulation does not have");
  }

  void run() {
    const int n = options_.frames;
    for (int f = 0; f < n; ++f) {
      r_.arrival_ms[f] = options_.rate_fps > 0 ? 1000.0 * f / options_.rate_fps : 0.0;
      push(r_.arrival_ms[f], kReady, 0, f);
    }
    double now = 0;
    for (;;) {
      const double cpu_end = next_cpu_end(now);
      if (events_.empty() && !std::isfinite(cpu_end)) break;
      if (events_.empty() || cpu_end <= events_.top().time) {
        now = advance(now, cpu_end);
        continue;
      }
      const Event e = events_.top();
      events_.pop();
      now = advance(now, e.time);
      if (e.kind == kReady) {
        state_[e.server].queue.push_back({e.frame, e.time});
        take(e.server, e.time);
      } else {
        finish(e.server, e.time);
      }
    }
  }

 private:
  enum Kind { kReady, kDone };
  struct Event {
    double time;
    int64_t order;
    Kind kind;
    int server, frame;
    bool operator>(const Event& o) const {
      return time != o.time ? time > o.time : order > o.order;
    }
  };
  struct ServerState {
    std::deque<std::pair<int, double>> queue;  // frame, ready time
    bool busy = false;
    size_t span = 0;  // index in r_.spans of the frame in service
    /// When the server's last frame left.
    double last_end = -std::numeric_limits<double>::infinity();
  };

  void push(double time, Kind kind, int server, int frame) {
    events_.push({time, order_++, kind, server, frame});
  }
  double service(int s, int frame) const {
    return frame == 0 ? servers_[s].first_ms : servers_[s].later_ms;
  }
  double cpu(int s, int frame) const {
    if (servers_[s].host < 0) return 0;
    return std::min(service(s, frame),
                    frame == 0 ? servers_[s].cpu_first_ms : servers_[s].cpu_later_ms);
  }
  /// The share of a core each CPU share in progress on host `h` gets.
  double rate(size_t h) const {
    const auto n = static_cast<double>(active_[h].size());
    return n > 0 ? std::min(1.0, options_.host_cores[h] / n) : 1.0;
  }
  double next_cpu_end(double now) const {
    double end = std::numeric_limits<double>::infinity();
    for (size_t h = 0; h < active_.size(); ++h)
      for (const auto& job : active_[h]) end = std::min(end, now + job.left / rate(h));
    return end;
  }
  /// Runs the CPU shares in progress from `now` to `to`; those that end go on with the rest of
  /// their service (the link's transmission).
  double advance(double now, double to) {
    for (size_t h = 0; h < active_.size(); ++h) {
      const double r = rate(h), done = (to - now) * r;
      auto& a = active_[h];
      // A share whose end is `to` ends (also where what is left of it is too small to move a
      // time that large).
      for (auto& job : a) job.left = now + job.left / r <= to ? 0.0 : job.left - done;
      for (auto it = a.begin(); it != a.end();) {
        if (it->left > 1e-12) {
          ++it;
          continue;
        }
        if (const int s = it->server; s >= 0) {
          const auto& span = r_.spans[state_[s].span];
          push(to + service(s, span.frame) - cpu(s, span.frame), kDone, s, span.frame);
        }
        it = a.erase(it);
      }
    }
    return to;
  }

  /// A free server takes the next frame of its queue: its CPU share starts on the host's cores,
  /// shared with the others in progress there, or its whole service without a host.
  void take(int s, double t) {
    auto& st = state_[s];
    if (st.busy || st.queue.empty()) return;
    const auto [frame, ready] = st.queue.front();
    st.queue.pop_front();
    st.busy = true;
    st.span = r_.spans.size();
    r_.spans.push_back({frame, s, ready, t, t});
    // The frame found the server idle: it waits for the work of a woken process, the more the
    // longer it slept.
    const double gap = ready - st.last_end, full = servers_[s].idle_full_ms;
    const double idle =
        gap > 0 ? servers_[s].idle_ms * (full > 0 ? std::min(1.0, gap / full) : 1.0) : 0.0;
    const double left = cpu(s, frame) + (servers_[s].host >= 0 ? idle : 0.0);
    if (left <= 0)
      push(t + service(s, frame) + idle, kDone, s, frame);
    else
      active_[static_cast<size_t>(servers_[s].host)].push_back({s, left});
  }
  void finish(int s, double t) {
    auto& st = state_[s];
    auto& span = r_.spans[st.span];
    span.end = t;
    st.busy = false;
    st.last_end = t;
    // The process's work the frame leaves behind runs on, sharing the host's cores.
    if (servers_[s].host >= 0 && servers_[s].background_ms > 0)
      active_[static_cast<size_t>(servers_[s].host)].push_back({-1, servers_[s].background_ms});
    const double arrive = t + (servers_[s].link ? servers_[s].latency_ms : 0.0);
    if (s + 1 < static_cast<int>(servers_.size()))
      push(arrive, kReady, s + 1, span.frame);
    else
      r_.done_ms[span.frame] = arrive;
    take(s, t);
  }

  const std::vector<PipelineServer>& servers_;
  const SimulationOptions& options_;
  SimulationResult& r_;
  std::vector<ServerState> state_;
  /// CPU work in progress on a host: a server's share (until it ends, the server holds its
  /// frame), or work a frame left behind (server -1).
  struct CpuJob {
    int server;
    double left;
  };
  /// Per host, the CPU work in progress.
  std::vector<std::vector<CpuJob>> active_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  int64_t order_ = 0;
};

}  // namespace

SimulationResult simulate_pipeline(const std::vector<PipelineServer>& servers,
                                   const SimulationOptions& options) {
  if (options.frames < 1) throw InputError("the simulation needs at least one frame");
  if (!(options.rate_fps >= 0) || !std::isfinite(options.rate_fps))
    throw InputError("the frame rate must be a finite number of 0 or more (0: back to back)");
  for (int c : options.host_cores)
    if (c < 1) throw InputError("a host of the simulation needs at least one core");
  const int n = options.frames;
  const int m = static_cast<int>(servers.size());
  SimulationResult r;
  r.arrival_ms.resize(n);
  r.done_ms.resize(n);
  r.latency_ms.resize(n);
  if (m == 0) {
    for (int f = 0; f < n; ++f)
      r.arrival_ms[f] = r.done_ms[f] = options.rate_fps > 0 ? 1000.0 * f / options.rate_fps : 0;
  } else {
    PipelineRun(servers, options, r).run();
  }
  std::vector<double> busy(m, 0.0);
  for (const auto& span : r.spans)
    busy[span.server] += service_of(servers[span.server], span.frame);
  for (int f = 0; f < n; ++f) r.latency_ms[f] = r.done_ms[f] - r.arrival_ms[f];
  std::stable_sort(r.spans.begin(), r.spans.end(), [](const ServerSpan& a, const ServerSpan& b) {
    return a.frame != b.frame ? a.frame < b.frame : a.server < b.server;
  });
  r.makespan_ms = *std::max_element(r.done_ms.begin(), r.done_ms.end()) - r.arrival_ms.front();
  r.throughput_fps = r.makespan_ms > 0 ? 1000.0 * n / r.makespan_ms : 0;
  const double steady = r.done_ms.back() - r.done_ms.front();
  r.steady_fps = n > 1 && steady > 0 ? 1000.0 * (n - 1) / steady : r.throughput_fps;
  for (double l : r.latency_ms) {
    r.mean_latency_ms += l / n;
    r.max_latency_ms = std::max(r.max_latency_ms, l);
  }
  for (int s = 0; s < m; ++s) r.servers.push_back(server_stats(r, servers[s], s, busy[s]));
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
  const auto link = [&](int l, int from, int to, double first_bytes, double later_bytes) {
    PipelineServer s{first.devices[from] + " -> " + first.devices[to], true,
                     first.links[l].busy_ms(first_bytes), later.links[l].busy_ms(later_bytes),
                     first.links[l].latency_ms};
    s.device = from;
    s.link_index = l;
    s.backward = from > to;
    s.cpu_first_ms = first.links[l].message_ms;
    s.cpu_later_ms = later_bytes > 0 ? later.links[l].message_ms : 0;
    out.push_back(s);
  };
  for (int d = first.source; d < k; ++d) {
    if (nodes_on[d] > 0) {
      PipelineServer s{first.devices[d], false, a.device_ms[d], b.device_ms[d], 0};
      s.device = d;
      s.cpu_first_ms = s.first_ms;
      s.cpu_later_ms = s.later_ms;
      out.push_back(s);
    }
    if (d + 1 < k && a.forward_bytes[d] > 0)
      link(d, d, d + 1, a.forward_bytes[d], b.forward_bytes[d]);
  }
  for (int l = k - 2; l >= 0; --l)
    if (a.backward_bytes[l] > 0) link(l, l + 1, l, a.backward_bytes[l], b.backward_bytes[l]);
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
