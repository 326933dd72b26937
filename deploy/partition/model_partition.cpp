#include "deploy/partition/model_partition.h"

#include <torch/torch.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "deploy/onnx/onnx_export.h"

namespace igb::deploy {

std::string transfer_precision_name(TransferPrecision p) {
  switch (p) {
    case TransferPrecision::kFp16:
      return "fp16";
    case TransferPrecision::kInt8:
      return "int8";
    case TransferPrecision::kFp32:
      break;
  }
  return "fp32";
}

TransferPrecision parse_transfer_precision(const std::string& text) {
  if (text == "fp32") return TransferPrecision::kFp32;
  if (text == "fp16") return TransferPrecision::kFp16;
  if (text == "int8") return TransferPrecision::kInt8;
  throw InputError("unknown transfer precision '" + text + "'; valid ones are fp32, fp16, int8");
}

namespace {

double element_bytes(TransferPrecision p) {
  return p == TransferPrecision::kFp32 ? 4 : p == TransferPrecision::kFp16 ? 2 : 1;
}
double header_bytes(TransferPrecision p) { return p == TransferPrecision::kInt8 ? 8 : 0; }

}  // namespace

double dense_bytes(const tools::Shape& shape, TransferPrecision p) {
  return static_cast<double>(tools::volume(shape)) * element_bytes(p) + header_bytes(p);
}

double csr_bytes(const tools::Shape& shape, double nonzeros, TransferPrecision p) {
  const double cols = shape.empty() ? 1.0 : static_cast<double>(std::max<int64_t>(1, shape.back()));
  const double rows = static_cast<double>(tools::volume(shape)) / cols;
  return nonzeros * (element_bytes(p) + 4) + (rows + 1) * 4 + header_bytes(p);
}

double encoded_bytes(const tools::Shape& shape, double nonzeros, TransferPrecision p) {
  return std::min(dense_bytes(shape, p), csr_bytes(shape, nonzeros, p));
}

std::map<int, ValueTraffic> measure_traffic(const tools::SummaryGraph& graph,
                                            const std::vector<at::Tensor>& frames) {
  std::map<int, ValueTraffic> out;
  std::map<int, at::Tensor> previous;
  std::map<int, int> diffs;
  torch::NoGradGuard no_grad;
  for (size_t f = 0; f < frames.size(); ++f) {
    if (frames[f].sizes().vec() != graph.input_shape())
      throw InputError("frame " + std::to_string(f) + " has shape " +
                       tools::shape_to_string(frames[f].sizes().vec()) + "; " + graph.model_name() +
                       " takes " + tools::shape_to_string(graph.input_shape()));
    tools::replay_trace(graph, frames[f], [&](int v, at::Tensor& t) {
      auto& tr = out[v];
      const double n = static_cast<double>(std::max<int64_t>(1, t.numel()));
      tr.zero_ratio += (t == 0).sum().item<double>() / n / static_cast<double>(frames.size());
      auto prev = previous.find(v);
      if (prev != previous.end()) {
        tr.diff_zero_ratio += (t == prev->second).sum().item<double>() / n;
        ++diffs[v];
      }
      previous[v] = t.detach().clone();
    });
  }
  for (auto& [v, tr] : out)
    tr.diff_zero_ratio = diffs[v] ? tr.diff_zero_ratio / diffs[v] : tr.zero_ratio;
  return out;
}

PartitionProblem partition_problem(const tools::SummaryGraph& graph, const DevicesFile& devices,
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
  for (const auto& l : devices.links) p.links.push_back({l.bandwidth, l.latency_ms});
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
        node.param_bytes += 4 * tools::volume(op.param_shapes.at(i));
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
      pv.bytes = encoded_bytes(v.shape, static_cast<double>(tools::volume(v.shape)) * (1 - zeros),
                               in.precision);
    } else {
      pv.bytes = dense_bytes(v.shape, in.precision);
    }
    p.values.push_back(pv);
  }
  p.check();
  return p;
}

std::vector<CutTraffic> cut_traffic(const tools::SummaryGraph& graph, TransferPrecision precision,
                                    const std::map<int, ValueTraffic>* traffic) {
  const std::set<int> outputs(graph.outputs().begin(), graph.outputs().end());
  // The last op reading each value (the end of the graph for an output).
  const int n = static_cast<int>(graph.ops().size());
  std::vector<CutTraffic> out;
  for (int cut = -1; cut < n; ++cut) {
    CutTraffic c;
    c.after = cut < 0 ? "" : graph.op(cut).name;
    double elements = 0, zeros = 0, diff_zeros = 0;
    for (const auto& v : graph.values()) {
      if (v.producer > cut) continue;
      bool later = outputs.count(v.id) > 0;
      for (int r : v.consumers) later = later || r > cut;
      if (!later) continue;
      c.tensors.push_back(onnx_value_name(graph, v.id));
      c.fp32_bytes += dense_bytes(v.shape, TransferPrecision::kFp32);
      c.fp16_bytes += dense_bytes(v.shape, TransferPrecision::kFp16);
      c.int8_bytes += dense_bytes(v.shape, TransferPrecision::kInt8);
      const double numel = static_cast<double>(tools::volume(v.shape));
      ValueTraffic t;
      if (traffic)
        if (auto it = traffic->find(v.id); it != traffic->end()) t = it->second;
      elements += numel;
      zeros += numel * t.zero_ratio;
      diff_zeros += numel * t.diff_zero_ratio;
      c.sent_bytes += encoded_bytes(v.shape, numel * (1 - t.zero_ratio), precision);
      c.diff_sent_bytes += encoded_bytes(v.shape, numel * (1 - t.diff_zero_ratio), precision);
    }
    c.zero_ratio = elements > 0 ? zeros / elements : 0;
    c.diff_zero_ratio = elements > 0 ? diff_zeros / elements : 0;
    out.push_back(c);
  }
  return out;
}

}  // namespace igb::deploy
