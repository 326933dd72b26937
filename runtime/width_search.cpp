#include "runtime/width_search.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "graph/summary_graph.h"
#include "runtime/inference_model.h"

namespace igb::runtime {

namespace {

using graph::OpKind;
using graph::OpNode;

/// The layer `op` alone with `in` input and `out` output channels, on random weights, and its
/// input shape; null when the runtime's form of it is not one this search builds.
std::pair<std::shared_ptr<torch::nn::Module>, std::vector<int64_t>> layer_alone(
    const graph::SummaryGraph& g, const OpNode& op, int64_t in, int64_t out,
    std::function<at::Tensor(const at::Tensor&)>* forward) {
  auto shape = g.shape(op.inputs[0]);
  const bool bias = !op.param("bias").empty();
  if (op.op_kind == OpKind::kLinear) {
    if (shape.empty()) return {};
    shape.back() = in;
    torch::nn::Linear l(torch::nn::LinearOptions(in, out).bias(bias));
    *forward = [p = l.ptr()](const at::Tensor& x) { return p->forward(x); };
    return {l.ptr(), shape};
  }
  if (op.kernel.size() != 2 || shape.size() != 4 || op.groups != 1) return {};
  shape[1] = in;
  const std::vector<int64_t> k = op.kernel, s = op.stride, p = op.padding, d = op.dilation;
  if (op.op_kind == OpKind::kConv) {
    torch::nn::Conv2d c(
        torch::nn::Conv2dOptions(in, out, k).stride(s).padding(p).dilation(d).bias(bias));
    *forward = [p = c.ptr()](const at::Tensor& x) { return p->forward(x); };
    return {c.ptr(), shape};
  }
  if (op.op_kind == OpKind::kConvTranspose) {
    const auto& y = g.shape(op.outputs[0]);
    std::vector<int64_t> extra(2);
    for (size_t i = 0; i < 2; ++i)
      extra[i] = y[i + 2] - ((shape[i + 2] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1);
    torch::nn::ConvTranspose2d c(torch::nn::ConvTranspose2dOptions(in, out, k)
                                     .stride(s)
                                     .padding(p)
                                     .dilation(d)
                                     .output_padding(extra)
                                     .bias(bias));
    *forward = [p = c.ptr()](const at::Tensor& x) { return p->forward(x); };
    return {c.ptr(), shape};
  }
  return {};
}

class WidthSearch {
 public:
  explicit WidthSearch(WidthSearchOptions options) : options_(options) {}

  int64_t choose(const compress::ThinnedTensor& t) {
    std::set<int64_t> candidates = {t.kept, t.dense};
    for (int64_t m : {8, 16, 32, 64})
      candidates.insert(std::min(t.dense, (t.kept + m - 1) / m * m));
    std::map<int64_t, double> cost;
    double fastest = std::numeric_limits<double>::infinity();
    for (int64_t w : candidates) {
      double sum = 0;
      for (const auto* op : t.producers) sum += time(*t.graph, *op, t.kept_of(op->inputs[0]), w);
      for (const auto* op : t.consumers) sum += time(*t.graph, *op, w, t.kept_of(op->outputs[0]));
      if (sum < 0) return t.kept;  // a layer this search cannot build
      cost[w] = sum;
      fastest = std::min(fastest, sum);
    }
    int64_t pick = t.kept;
    for (const auto& [w, c] : cost)
      if (c <= fastest * (1 + options_.tolerance)) pick = w;
    return pick;
  }

 private:
  /// Milliseconds of `op` with `in` input and `out` output channels on the inference form, or
  /// -1 when it cannot be built.
  double time(const graph::SummaryGraph& g, const OpNode& op, int64_t in, int64_t out) {
    const auto key = std::make_tuple(op.name, g.shape(op.inputs[0]), in, out);
    if (auto it = times_.find(key); it != times_.end()) return it->second;
    std::function<at::Tensor(const at::Tensor&)> forward;
    torch::manual_seed(0);
    auto [layer, shape] = layer_alone(g, op, in, out, &forward);
    double best = -1;
    if (layer) {
      auto form = InferenceModel::make(layer, forward, op.name);
      const auto x = torch::randn(shape);
      const auto steps = form->steps(shape);
      best = std::numeric_limits<double>::infinity();
      for (int r = 0; r < std::max(1, options_.rounds); ++r) {
        const auto ms = form->time_steps(x, options_.repeats);
        double sum = 0;
        for (size_t i = 0; i < steps.size() && i < ms.size(); ++i)
          if (steps[i].kind != "Reorder") sum += ms[i];
        best = std::min(best, sum);
      }
    }
    times_[key] = best;
    return best;
  }

  WidthSearchOptions options_;
  std::map<std::tuple<std::string, std::vector<int64_t>, int64_t, int64_t>, double> times_;
};

}  // namespace

compress::WidthPolicy fastest_widths(const WidthSearchOptions& options) {
  auto search = std::make_shared<WidthSearch>(options);
  return [search](const compress::ThinnedTensor& t) { return search->choose(t); };
}

}  // namespace igb::runtime
