#include "deploy/partition/traffic.h"

#include <torch/torch.h>

#include <set>

#include "core/error.h"
#include "deploy/onnx/onnx_export.h"

namespace igb::deploy {

std::map<int, ValueTraffic> measure_traffic(const graph::SummaryGraph& graph,
                                            const std::vector<at::Tensor>& frames) {
  std::map<int, ValueTraffic> out;
  std::map<int, at::Tensor> previous;
  std::map<int, int> diffs;
  torch::NoGradGuard no_grad;
  for (size_t f = 0; f < frames.size(); ++f) {
    if (frames[f].sizes().vec() != graph.input_shape())
      throw InputError("frame " + std::to_string(f) + " has shape " +
                       graph::shape_to_string(frames[f].sizes().vec()) + "; " + graph.model_name() +
                       " takes " + graph::shape_to_string(graph.input_shape()));
    graph::replay_trace(graph, frames[f], [&](int v, at::Tensor& t) {
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

std::vector<CutTraffic> cut_traffic(const graph::SummaryGraph& graph, TransferPrecision precision,
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
      const double numel = static_cast<double>(graph::volume(v.shape));
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
