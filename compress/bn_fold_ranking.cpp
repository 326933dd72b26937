#include "compress/bn_fold_ranking.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include "graph/summary_graph.h"

namespace igb::compress {

std::map<std::string, std::string> conv_batchnorm_pairs(torch::nn::Module& model,
                                                        const graph::SummaryGraph& graph) {
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    modules[item.key()] = item.value();
  auto module = [&](const std::string& name) -> torch::nn::Module* {
    auto it = modules.find(name);
    return it == modules.end() ? nullptr : it->second.get();
  };
  std::map<std::string, std::string> pairs;
  const auto& ops = graph.ops();
  for (const auto& op : ops) {
    if (op.op_kind != graph::OpKind::kConv ||
        !dynamic_cast<torch::nn::Conv2dImpl*>(module(op.module)))
      continue;
    const auto next = graph.successors(op.id);
    if (next.size() != 1 || ops[next[0]].op_kind != graph::OpKind::kBatchNorm ||
        !dynamic_cast<torch::nn::BatchNorm2dImpl*>(module(ops[next[0]].module)))
      continue;
    pairs[op.module + ".weight"] = ops[next[0]].module;
  }
  return pairs;
}

ModelParams bn_folded_params(const ModelParams& params,
                             const std::map<std::string, std::string>& pairs) {
  ModelParams folded = params;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : params.model().named_modules("", /*include_self=*/false))
    modules[item.key()] = item.value();
  torch::NoGradGuard no_grad;
  for (const auto& [weight, bn_name] : pairs) {
    if (!params.contains(weight) || !modules.count(bn_name)) continue;
    const auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(modules.at(bn_name).get());
    if (!bn) continue;
    const at::Tensor& w = params.at(weight);
    const auto sigma = (bn->running_var + bn->options.eps()).sqrt();
    const auto gamma = bn->options.affine() ? bn->weight.detach() : at::ones_like(sigma);
    if (gamma.numel() != w.size(0)) continue;  // a BatchNorm of another width: not its follower
    std::vector<int64_t> view(static_cast<size_t>(w.dim()), 1);
    view[0] = w.size(0);
    folded.replace(weight, w.detach() * (gamma / sigma).view(view));
  }
  return folded;
}

}  // namespace igb::compress
