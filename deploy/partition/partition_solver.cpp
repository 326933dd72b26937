#include "deploy/partition/partition_solver.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>

#include "core/error.h"

namespace igb::deploy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using Bits = std::vector<uint64_t>;

bool test(const Bits& b, int i) { return (b[i >> 6] >> (i & 63)) & 1U; }
void set(Bits& b, int i) { b[i >> 6] |= uint64_t{1} << (i & 63); }
bool subset(const Bits& a, const Bits& b) {
  for (size_t w = 0; w < a.size(); ++w)
    if (a[w] & ~b[w]) return false;
  return true;
}
std::string key(const Bits& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(uint64_t));
}

/// The nodes each node reads from.
std::vector<std::vector<int>> producer_nodes(const PartitionProblem& p) {
  std::vector<std::vector<int>> producers(p.nodes.size());
  for (const auto& v : p.values)
    if (v.producer >= 0)
      for (int r : v.consumers) producers[r].push_back(v.producer);
  return producers;
}

/// Every set of nodes closed under "reads from", smallest first (breadth first from the empty
/// set, one node at a time). More than `limit` stops the walk with limit + 1 sets.
std::vector<Bits> cut_sets(const PartitionProblem& p, int64_t limit) {
  const int n = static_cast<int>(p.nodes.size());
  const size_t words = static_cast<size_t>(n + 63) / 64;
  const auto producers = producer_nodes(p);
  std::vector<Bits> sets{Bits(words, 0)};
  std::unordered_map<std::string, int64_t> seen{{key(sets[0]), 0}};
  for (size_t at = 0; at < sets.size(); ++at) {
    for (int i = 0; i < n; ++i) {
      if (test(sets[at], i)) continue;
      bool ready = true;
      for (int q : producers[i]) ready = ready && test(sets[at], q);
      if (!ready) continue;
      Bits next = sets[at];
      set(next, i);
      if (seen.emplace(key(next), static_cast<int64_t>(sets.size())).second) {
        sets.push_back(std::move(next));
        if (static_cast<int64_t>(sets.size()) > limit) return sets;
      }
    }
  }
  return sets;
}

/// What the dynamic programme needs of one cut set S (the nodes on device l or earlier).
struct CutSet {
  Bits nodes;
  /// Per device: the sum of the finite costs of S's nodes, and how many cannot run there.
  std::vector<double> cost;
  std::vector<int> impossible;
  double param_bytes = 0;
  /// Per link l, with S as the nodes on devices <= l: bytes forward and backward.
  std::vector<double> forward, backward;
};

std::vector<CutSet> describe(const PartitionProblem& p, std::vector<Bits> sets) {
  const int k = p.device_count();
  std::vector<CutSet> out(sets.size());
  for (size_t j = 0; j < sets.size(); ++j) {
    CutSet& c = out[j];
    c.nodes = std::move(sets[j]);
    c.cost.assign(k, 0.0);
    c.impossible.assign(k, 0);
    c.forward.assign(std::max(0, k - 1), 0.0);
    c.backward = c.forward;
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      if (!test(c.nodes, static_cast<int>(i))) continue;
      c.param_bytes += static_cast<double>(p.nodes[i].param_bytes);
      for (int d = 0; d < k; ++d) {
        const double x = p.nodes[i].cost_ms[d];
        if (std::isfinite(x))
          c.cost[d] += x;
        else
          ++c.impossible[d];
      }
    }
    for (int l = 0; l + 1 < k; ++l) {
      for (const auto& v : p.values) {
        const bool made = v.producer < 0 ? p.source <= l : test(c.nodes, v.producer);
        bool read_later = v.output && p.sink > l;
        for (int r : v.consumers) read_later = read_later || !test(c.nodes, r);
        if (made && read_later) c.forward[l] += v.bytes;
        if (v.output && !made && l >= p.sink) c.backward[l] += v.bytes;
      }
    }
  }
  return out;
}

struct Cell {
  double value = kInf;
  int parent = -1;
};

/// The stage of device d holding to \ from, when it can run all of them within memory: its
/// milliseconds; +infinity otherwise.
double stage_ms(const PartitionProblem& p, const CutSet& from, const CutSet& to, int d) {
  if (to.impossible[d] != from.impossible[d]) return kInf;
  if (to.param_bytes - from.param_bytes > p.memory_bytes[d]) return kInf;
  return std::max(0.0, to.cost[d] - from.cost[d]);
}

/// One pass of the programme. Latency (cap = +inf): the sum of stages and transfers. Bottleneck
/// (sum = false): the largest server. With a finite cap, transitions whose stage or link busy time
/// exceeds it are left out (the latency pass under the optimal bottleneck).
std::vector<std::vector<Cell>> run(const PartitionProblem& p, const std::vector<CutSet>& sets,
                                   bool sum, double cap) {
  const int k = p.device_count();
  const int m = static_cast<int>(sets.size());
  std::vector<std::vector<Cell>> f(k, std::vector<Cell>(m));
  auto combine = [&](double acc, double link, double link_busy, double stage) {
    if (link_busy > cap || stage > cap) return kInf;
    return sum ? acc + link + stage : std::max({acc, link_busy, stage});
  };
  // Links before the source carry only results returning to a sink before it.
  double before = 0, before_busy = 0;
  for (int l = 0; l < p.source; ++l) {
    before += p.links[l].transfer_ms(sets[0].backward[l]);
    before_busy = std::max(before_busy, p.links[l].busy_ms(sets[0].backward[l]));
  }
  for (int j = 0; j < m; ++j) {
    const double stage = stage_ms(p, sets[0], sets[j], p.source);
    if (before_busy > cap || stage > cap) continue;
    f[p.source][j].value = sum ? before + stage : std::max(before_busy, stage);
    f[p.source][j].parent = 0;
  }
  for (int d = p.source + 1; d < k; ++d) {
    const int l = d - 1;
    for (int from = 0; from < m; ++from) {
      const double acc = f[d - 1][from].value;
      if (!std::isfinite(acc)) continue;
      const auto& s = sets[from];
      const double link =
          p.links[l].transfer_ms(s.forward[l]) + p.links[l].transfer_ms(s.backward[l]);
      const double busy =
          std::max(p.links[l].busy_ms(s.forward[l]), p.links[l].busy_ms(s.backward[l]));
      for (int to = from; to < m; ++to) {
        if (!subset(s.nodes, sets[to].nodes)) continue;
        const double v = combine(acc, link, busy, stage_ms(p, s, sets[to], d));
        if (v < f[d][to].value) f[d][to] = {v, from};
      }
    }
  }
  return f;
}

Assignment backtrack(const PartitionProblem& p, const std::vector<CutSet>& sets,
                     const std::vector<std::vector<Cell>>& f, int last) {
  Assignment a(p.nodes.size(), p.source);
  int j = last;
  for (int d = p.device_count() - 1; d >= p.source; --d) {
    const int from = d == p.source ? 0 : f[d][j].parent;
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (test(sets[j].nodes, static_cast<int>(i)) && !test(sets[from].nodes, static_cast<int>(i)))
        a[i] = d;
    j = from;
  }
  return a;
}

// Dinic's maximum flow on real capacities.
class MaxFlow {
 public:
  explicit MaxFlow(int n) : graph_(n), level_(n), next_(n) {}
  void add(int u, int v, double cap) {
    if (cap <= 0) return;
    graph_[u].push_back({v, static_cast<int>(graph_[v].size()), cap});
    graph_[v].push_back({u, static_cast<int>(graph_[u].size()) - 1, 0});
  }
  double run(int s, int t) {
    double flow = 0;
    while (bfs(s, t)) {
      std::fill(next_.begin(), next_.end(), 0);
      while (true) {
        const double f = dfs(s, t, kInf);
        if (f <= kEps) break;
        flow += f;
        if (!std::isfinite(flow)) return flow;
      }
    }
    return flow;
  }
  /// Nodes reachable from s in the residual graph after run().
  std::vector<bool> source_side(int s) const {
    std::vector<bool> seen(graph_.size(), false);
    std::deque<int> q{s};
    seen[s] = true;
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      for (const auto& e : graph_[u])
        if (e.cap > kEps && !seen[e.to]) {
          seen[e.to] = true;
          q.push_back(e.to);
        }
    }
    return seen;
  }

 private:
  static constexpr double kEps = 1e-12;
  struct Edge {
    int to, rev;
    double cap;
  };
  bool bfs(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    std::deque<int> q{s};
    level_[s] = 0;
    while (!q.empty()) {
      const int u = q.front();
      q.pop_front();
      for (const auto& e : graph_[u])
        if (e.cap > kEps && level_[e.to] < 0) {
          level_[e.to] = level_[u] + 1;
          q.push_back(e.to);
        }
    }
    return level_[t] >= 0;
  }
  double dfs(int u, int t, double pushed) {
    if (u == t) return pushed;
    for (int& i = next_[u]; i < static_cast<int>(graph_[u].size()); ++i) {
      Edge& e = graph_[u][i];
      if (e.cap <= kEps || level_[e.to] != level_[u] + 1) continue;
      const double got = dfs(e.to, t, std::min(pushed, e.cap));
      if (got > kEps) {
        e.cap -= got;
        graph_[e.to][e.rev].cap += got;
        return got;
      }
    }
    return 0;
  }
  std::vector<std::vector<Edge>> graph_;
  std::vector<int> level_, next_;
};

PartitionPlan plan(std::string method, const PartitionProblem& p, Assignment a) {
  PartitionPlan out;
  out.method = std::move(method);
  out.cost = evaluate(p, a);
  out.assignment = std::move(a);
  return out;
}

bool no_memory_limits(const PartitionProblem& p) {
  for (double m : p.memory_bytes)
    if (std::isfinite(m)) return false;
  return true;
}

}  // namespace

int64_t count_cut_sets(const PartitionProblem& problem, int64_t limit) {
  problem.check();
  return static_cast<int64_t>(cut_sets(problem, limit).size());
}

PartitionPlan min_cut_plan(const PartitionProblem& p) {
  p.check();
  if (p.device_count() != 2 || p.source != 0 || p.sink != 1 || !no_memory_limits(p))
    throw InputError(
        "the min-cut planner takes two devices, frames starting on the first, "
        "results going to the second and no memory limit");
  const int n = static_cast<int>(p.nodes.size());
  // Source side = first device. Node v: v→t costs its time on the first device, s→v its time on
  // the second. Value x made by u: u→aux(x) is its transfer, aux(x)→reader is infinite, so x is
  // paid once however many readers sit on the second device; reader→u is infinite, so no edge
  // runs backwards.
  const int s = n, t = n + 1;
  MaxFlow flow(n + 2 + static_cast<int>(p.values.size()));
  const PartitionLink& link = p.links[0];
  for (int v = 0; v < n; ++v) {
    flow.add(v, t, p.nodes[v].cost_ms[0]);
    flow.add(s, v, p.nodes[v].cost_ms[1]);
  }
  for (size_t x = 0; x < p.values.size(); ++x) {
    const auto& v = p.values[x];
    const int aux = n + 2 + static_cast<int>(x);
    const int from = v.producer < 0 ? s : v.producer;
    // Transmission only: the link carries a message under every assignment, so its latency and
    // per-message work are the same constant in every cut.
    const double w = 1000.0 * v.bytes / link.bandwidth;
    const bool to_sink = v.output;
    if (!v.consumers.empty() || to_sink) flow.add(from, aux, w);
    for (int r : v.consumers) {
      flow.add(aux, r, kInf);
      if (v.producer >= 0) flow.add(r, v.producer, kInf);
    }
    if (to_sink) flow.add(aux, t, kInf);
  }
  const double cut = flow.run(s, t);
  if (!std::isfinite(cut))
    throw InputError("no valid assignment: some node can run on neither device");
  const auto side = flow.source_side(s);
  Assignment a(n);
  for (int v = 0; v < n; ++v) a[v] = side[v] ? 0 : 1;
  // The cut leaves out the link's fixed latency: with results going to the second device the link
  // carries a message under every assignment, so the latency is the same for all of them.
  PartitionPlan best = plan("min cut", p, a);
  for (int d = 0; d < 2; ++d) {
    PartitionPlan one = plan("min cut", p, Assignment(n, d));
    if (better(one.cost, best.cost, PartitionObjective::kLatency)) best = one;
  }
  return best;
}

PartitionPlan solve_partition(const PartitionProblem& p, PartitionObjective objective,
                              const PartitionSolverOptions& options) {
  p.check();
  if (objective == PartitionObjective::kLatency && p.device_count() == 2 && p.source == 0 &&
      p.sink == 1 && no_memory_limits(p)) {
    PartitionPlan best = min_cut_plan(p);
    if (best.cost.valid) return best;
  }
  auto sets_bits = cut_sets(p, options.max_cut_sets);
  if (static_cast<int64_t>(sets_bits.size()) > options.max_cut_sets)
    throw InputError(p.model + " has more than " + std::to_string(options.max_cut_sets) +
                     " cut sets; the exact planner stops there");
  const auto sets = describe(p, std::move(sets_bits));
  const int last = static_cast<int>(sets.size()) - 1;  // every node: found last, breadth first
  const int k = p.device_count();
  std::vector<std::vector<Cell>> f;
  if (objective == PartitionObjective::kThroughput) {
    const auto bottleneck = run(p, sets, /*sum=*/false, kInf);
    const double b = bottleneck[k - 1][last].value;
    if (std::isfinite(b)) f = run(p, sets, /*sum=*/true, b * (1 + 1e-12) + 1e-15);
  } else {
    f = run(p, sets, /*sum=*/true, kInf);
  }
  if (f.empty() || !std::isfinite(f[k - 1][last].value))
    throw InputError("no valid assignment of " + p.model +
                     " to the chain: check the devices' memory limits and cost files");
  return plan("exact (cut-set DP)", p, backtrack(p, sets, f, last));
}

std::vector<PartitionPlan> baseline_plans(const PartitionProblem& p, PartitionObjective objective) {
  p.check();
  const int n = static_cast<int>(p.nodes.size());
  const int first = p.source, last_device = p.device_count() - 1;
  std::vector<PartitionPlan> out;
  out.push_back(plan("all on " + p.devices[first], p, Assignment(n, first)));
  if (last_device != first)
    out.push_back(plan("all on " + p.devices[last_device], p, Assignment(n, last_device)));
  // Neurosurgeon: one split of the topological order between the first and the last device.
  PartitionPlan split;
  for (int at = 0; at <= n; ++at) {
    Assignment a(n, last_device);
    for (int i = 0; i < at; ++i) a[i] = first;
    PartitionPlan c = plan("best single split", p, a);
    if (split.assignment.empty() || better(c.cost, split.cost, objective)) split = c;
  }
  out.push_back(split);
  // Load balanced: contiguous stages, each device's share of the work proportional to its speed
  // (the inverse of its time for the whole model); a node goes where the middle of its work falls.
  // Each device's time for the whole model, once.
  std::vector<double> total(p.device_count(), 0.0);
  for (const auto& node : p.nodes)
    for (int d = first; d <= last_device; ++d) total[d] += node.cost_ms[d];
  auto usable = [&](int d) { return std::isfinite(total[d]) && total[d] > 0; };
  std::vector<double> speed;
  double speed_sum = 0;
  for (int d = first; d <= last_device; ++d) {
    speed.push_back(usable(d) ? 1.0 / total[d] : 0.0);
    speed_sum += speed.back();
  }
  double work_total = 0;
  std::vector<double> work(n);
  for (int i = 0; i < n; ++i) {
    // The work of a node relative to the model, averaged over the devices that can run it.
    double share = 0;
    int count = 0;
    for (int d = first; d <= last_device; ++d) {
      if (usable(d) && std::isfinite(p.nodes[i].cost_ms[d])) {
        share += p.nodes[i].cost_ms[d] / total[d];
        ++count;
      }
    }
    work[i] = count ? share / count : 0;
    work_total += work[i];
  }
  Assignment balanced(n, first);
  double done = 0;
  for (int i = 0; i < n; ++i) {
    const double middle = work_total > 0 ? (done + work[i] / 2) / work_total : 0;
    double bound = 0;
    int d = first;
    for (size_t e = 0; e < speed.size(); ++e) {
      bound += speed_sum > 0 ? speed[e] / speed_sum : 1.0 / static_cast<double>(speed.size());
      d = first + static_cast<int>(e);
      if (middle <= bound + 1e-12) break;
    }
    balanced[i] = std::max(d, i ? balanced[i - 1] : first);
    done += work[i];
  }
  out.push_back(plan("load balanced", p, balanced));
  return out;
}

}  // namespace igb::deploy
