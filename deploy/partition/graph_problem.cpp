#include "deploy/partition/graph_problem.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/error.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/partition/partition_solver.h"

namespace igb::deploy {

PartitionProblem partition_problem(const graph::SummaryGraph& graph, const DevicesFile& devices,
                                   const ModelPartitionInputs& in) {
  const size_t k = devices.devices.size();
  if (in.costs.size() != k)
    throw InputError("cost files for " + std::to_string(in.costs.size()) + " of " +
                     std::to_string(k) + " devices");
  if (in.differences && !in.traffic)
    throw InputError("sizing frame differences needs frames to measure them on");
  PartitionProblem p;
  p.model = graph.model_name();
  for (const auto& d : devices.devices) {
    p.devices.push_back(d.name);
    p.memory_bytes.push_back(d.memory_bytes);
  }
  for (const auto& l : devices.links) p.links.push_back({l.bandwidth, l.latency_ms, l.message_ms});
  p.source = devices.source;
  p.sink = devices.sink;
  for (const auto& op : graph.ops()) {
    PartitionNode node;
    node.name = op.name;
    node.type = op.type;
    for (size_t d = 0; d < k; ++d) {
      auto it = in.costs[d].ms.find(op.name);
      if (it == in.costs[d].ms.end())
        throw InputError("the cost file of " + devices.devices[d].name + " has no cost for op '" +
                         op.name + "' of " + graph.model_name());
      node.cost_ms.push_back(it->second / devices.devices[d].speed);
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < op.params.size(); ++i)
      if (seen.insert(op.params[i]).second)
        node.param_bytes += 4 * graph::volume(op.param_shapes.at(i));
    p.nodes.push_back(node);
  }
  const std::set<int> outputs(graph.outputs().begin(), graph.outputs().end());
  for (const auto& v : graph.values()) {
    PartitionValue pv;
    pv.producer = v.producer;
    pv.output = outputs.count(v.id) > 0;
    std::set<int> readers(v.consumers.begin(), v.consumers.end());
    pv.consumers.assign(readers.begin(), readers.end());
    if (pv.consumers.empty() && !pv.output) continue;
    pv.name = onnx_value_name(graph, v.id);
    if (in.traffic) {
      auto it = in.traffic->find(v.id);
      const double zeros = it == in.traffic->end() ? 0.0
                                                   : (in.differences ? it->second.diff_zero_ratio
                                                                     : it->second.zero_ratio);
      pv.bytes = encoded_bytes(v.shape, static_cast<double>(graph::volume(v.shape)) * (1 - zeros),
                               in.precision);
    } else {
      pv.bytes = dense_bytes(v.shape, in.precision);
    }
    p.values.push_back(pv);
  }
  p.check();
  return p;
}

void check_memory_fits(const graph::SummaryGraph& graph, const DevicesFile& devices) {
  double limits = 0;
  for (const auto& d : devices.devices) limits += d.memory_bytes;
  if (!std::isfinite(limits)) return;  // a device without a limit takes whatever is left
  ModelPartitionInputs zero;
  LayerCosts costs;
  for (const auto& op : graph.ops()) costs.ms[op.name] = 0;
  zero.costs.assign(devices.devices.size(), costs);
  const PartitionProblem p = partition_problem(graph, devices, zero);
  const PartitionSolverOptions options;
  if (count_cut_sets(p, options.max_cut_sets) > options.max_cut_sets) return;
  try {
    (void)solve_partition(p, PartitionObjective::kLatency, options);
  } catch (const InputError&) {
    double params = 0;
    for (const auto& n : p.nodes) params += n.param_bytes;
    char text[160];
    std::snprintf(text, sizeof text,
                  " (%.3g MB of parameters) fits no assignment to the chain: the devices' memory "
                  "limits add up to %.3g MB",
                  params / 1e6, limits / 1e6);
    throw InputError(
        graph.model_name() + text +
        (params <= limits ? ", and no split of the model along the chain fits them" : ""));
  }
}

}  // namespace igb::deploy
