#include "deploy/partition/partition_problem.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/error.h"

namespace igb::deploy {

void PartitionProblem::check() const {
  const int k = device_count();
  const int n = static_cast<int>(nodes.size());
  if (k < 1) throw InputError("a partition needs at least one device");
  if (static_cast<int>(links.size()) != k - 1)
    throw InputError("a chain of " + std::to_string(k) + " devices has " + std::to_string(k - 1) +
                     " links, not " + std::to_string(links.size()));
  if (static_cast<int>(memory_bytes.size()) != k)
    throw InputError("memory limits for " + std::to_string(memory_bytes.size()) + " of " +
                     std::to_string(k) + " devices");
  if (source < 0 || source >= k || sink < 0 || sink >= k)
    throw InputError("frames start or results go to a device outside the chain");
  for (const auto& l : links)
    if (!(l.bandwidth > 0) || !std::isfinite(l.bandwidth) || !(l.latency_ms >= 0) ||
        !std::isfinite(l.latency_ms) || !(l.message_ms >= 0) || !std::isfinite(l.message_ms))
      throw InputError(
          "a link needs a positive, finite bandwidth and a latency and message cost of 0 or more");
  for (const auto& node : nodes) {
    if (static_cast<int>(node.cost_ms.size()) != k)
      throw InputError("node '" + node.name + "' has costs for " +
                       std::to_string(node.cost_ms.size()) + " of " + std::to_string(k) +
                       " devices");
    for (double c : node.cost_ms)
      if (!(c >= 0)) throw InputError("node '" + node.name + "' has a negative or NaN cost");
  }
  for (const auto& v : values) {
    if (v.producer < -1 || v.producer >= n)
      throw InputError("value '" + v.name + "' has no valid producer");
    if (!(v.bytes >= 0) || !std::isfinite(v.bytes))
      throw InputError("value '" + v.name + "' has a negative or non-finite size");
    for (int c : v.consumers)
      if (c < 0 || c >= n || c <= v.producer)
        throw InputError("value '" + v.name + "' is read by a node that is not after its producer");
  }
}

PlanCost evaluate(const PartitionProblem& p, const Assignment& a) {
  const int k = p.device_count();
  PlanCost c;
  c.device_ms.assign(k, 0.0);
  c.device_param_bytes.assign(k, 0);
  c.forward_bytes.assign(std::max(0, k - 1), 0.0);
  c.backward_bytes = c.forward_bytes;
  c.forward_ms = c.forward_bytes;
  c.backward_ms = c.forward_bytes;
  c.forward_values.assign(std::max(0, k - 1), {});
  auto invalid = [&](const std::string& why) {
    if (c.valid) c.why_invalid = why;
    c.valid = false;
  };
  if (a.size() != p.nodes.size()) {
    invalid("the assignment has " + std::to_string(a.size()) + " entries for " +
            std::to_string(p.nodes.size()) + " nodes");
    return c;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = a[i];
    if (d < 0 || d >= k) {
      invalid("node '" + p.nodes[i].name + "' is on no device of the chain");
      return c;
    }
    if (d < p.source) invalid("node '" + p.nodes[i].name + "' runs before frames arrive");
    const double cost = p.nodes[i].cost_ms[d];
    if (!std::isfinite(cost))
      invalid("node '" + p.nodes[i].name + "' cannot run on " + p.devices[d]);
    c.device_ms[d] += cost;
    c.device_param_bytes[d] += p.nodes[i].param_bytes;
  }
  for (const auto& v : p.values) {
    const int from = v.producer < 0 ? p.source : a[v.producer];
    int to = from;
    for (int r : v.consumers) {
      if (a[r] < from)
        invalid("'" + p.nodes[r].name + "' reads '" + v.name + "' from a later device");
      to = std::max(to, a[r]);
    }
    if (v.output) to = std::max(to, p.sink);
    for (int l = from; l < to; ++l) {
      c.forward_bytes[l] += v.bytes;
      c.forward_values[l].push_back(v.name);
    }
    if (v.output)
      for (int l = p.sink; l < from; ++l) c.backward_bytes[l] += v.bytes;
  }
  for (int d = 0; d < k; ++d)
    if (static_cast<double>(c.device_param_bytes[d]) > p.memory_bytes[d])
      invalid(p.devices[d] + " holds " + std::to_string(c.device_param_bytes[d]) +
              " bytes of parameters, over its memory limit");
  for (int l = 0; l + 1 < k; ++l) {
    c.forward_ms[l] = p.links[l].transfer_ms(c.forward_bytes[l]);
    c.backward_ms[l] = p.links[l].transfer_ms(c.backward_bytes[l]);
    c.latency_ms += c.forward_ms[l] + c.backward_ms[l];
    c.bottleneck_ms = std::max({c.bottleneck_ms, p.links[l].busy_ms(c.forward_bytes[l]),
                                p.links[l].busy_ms(c.backward_bytes[l])});
  }
  for (double ms : c.device_ms) {
    c.latency_ms += ms;
    c.bottleneck_ms = std::max(c.bottleneck_ms, ms);
  }
  return c;
}

std::string objective_name(PartitionObjective o) {
  return o == PartitionObjective::kLatency ? "latency" : "throughput";
}

PartitionObjective parse_objective(const std::string& text) {
  if (text == "latency") return PartitionObjective::kLatency;
  if (text == "throughput") return PartitionObjective::kThroughput;
  throw InputError("unknown objective '" + text + "'; valid objectives are latency, throughput");
}

namespace {

/// -1 when x is clearly below y, 1 when clearly above, 0 when equal within 1e-9 relative.
int compare(double x, double y) {
  const double tol = 1e-9 * std::max({1.0, std::fabs(x), std::fabs(y)});
  if (x < y - tol) return -1;
  if (x > y + tol) return 1;
  return 0;
}

}  // namespace

bool better(const PlanCost& a, const PlanCost& b, PartitionObjective objective) {
  if (a.valid != b.valid) return a.valid;
  const bool lat = objective == PartitionObjective::kLatency;
  const int first =
      compare(lat ? a.latency_ms : a.bottleneck_ms, lat ? b.latency_ms : b.bottleneck_ms);
  if (first != 0) return first < 0;
  return compare(lat ? a.bottleneck_ms : a.latency_ms, lat ? b.bottleneck_ms : b.latency_ms) < 0;
}

BruteForceResult brute_force_plan(const PartitionProblem& p, PartitionObjective objective,
                                  int64_t max_assignments) {
  p.check();
  const int n = static_cast<int>(p.nodes.size());
  const int k = p.device_count();
  // The nodes whose outputs node i reads.
  std::vector<std::vector<int>> producers(n);
  for (const auto& v : p.values)
    if (v.producer >= 0)
      for (int r : v.consumers) producers[r].push_back(v.producer);
  BruteForceResult result;
  result.best.method = "brute force";
  result.best.cost.valid = false;
  Assignment a(n, 0);
  std::function<void(int)> place = [&](int i) {
    if (i == n) {
      if (++result.assignments > max_assignments)
        throw InputError("brute force stops after " + std::to_string(max_assignments) +
                         " assignments");
      PlanCost c = evaluate(p, a);
      if (result.best.assignment.empty() || better(c, result.best.cost, objective)) {
        result.best.assignment = a;
        result.best.cost = std::move(c);
      }
      return;
    }
    int lo = p.source;
    for (int q : producers[i]) lo = std::max(lo, a[q]);
    for (int d = lo; d < k; ++d) {
      a[i] = d;
      place(i + 1);
    }
  };
  place(0);
  return result;
}

}  // namespace igb::deploy
