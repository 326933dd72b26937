#include "deploy/early_exit/exit_network.h"

#include <ATen/ops/cross_entropy_loss.h>
#include <torch/nn/modules/container/sequential.h>

#include <algorithm>
#include <limits>
#include <set>

#include "core/activation.h"
#include "core/error.h"
#include "runtime/inference_model.h"

namespace igb::deploy {

ExitCriterion parse_exit_criterion(const std::string& name) {
  if (name == "max-softmax") return ExitCriterion::kMaxSoftmax;
  if (name == "entropy") return ExitCriterion::kEntropy;
  if (name == "label-loss") return ExitCriterion::kLabelLoss;
  throw InputError("--exit-criterion: unknown criterion '" + name +
                   "'; valid: max-softmax, entropy, label-loss");
}

std::string exit_criterion_name(ExitCriterion criterion) {
  switch (criterion) {
    case ExitCriterion::kMaxSoftmax:
      return "max-softmax";
    case ExitCriterion::kEntropy:
      return "entropy";
    case ExitCriterion::kLabelLoss:
      return "label-loss";
  }
  return "unknown";
}

at::Tensor exit_scores(const at::Tensor& logits, ExitCriterion criterion,
                       const at::Tensor& target) {
  const at::Tensor z = logits.to(at::kFloat);
  switch (criterion) {
    case ExitCriterion::kMaxSoftmax:
      return std::get<0>(z.softmax(1).max(1));
    case ExitCriterion::kEntropy: {
      const auto logp = z.log_softmax(1);
      return (logp.exp() * logp).sum(1);  // −H
    }
    case ExitCriterion::kLabelLoss:
      if (!target.defined())
        throw InputError("the label-loss exit criterion needs the labels (Distiller's rule)");
      return -at::cross_entropy_loss(z, target.to(z.device()), {}, at::Reduction::None);
  }
  return {};
}

double natural_threshold(ExitCriterion criterion, double score_threshold) {
  return criterion == ExitCriterion::kMaxSoftmax ? score_threshold : -score_threshold;
}

double score_threshold(ExitCriterion criterion, double natural) {
  return natural_threshold(criterion, natural);
}

namespace {

/// The inference form of an exit's head, compiled for its activation's shape; null when the
/// runtime cannot trace it there (the head then runs as LibTorch's forward).
std::shared_ptr<runtime::InferenceModel> head_form(torch::nn::Sequential head,
                                                   const graph::Shape& shape,
                                                   const std::string& name, bool int8) {
  try {
    runtime::InferenceOptions options;
    options.int8 = int8;
    auto form = runtime::InferenceModel::make(
        head.ptr(), [head](const at::Tensor& a) mutable { return head->forward(a); },
        name + " exit head", options);
    form->prepare(shape);
    return form;
  } catch (const InputError&) {
    return nullptr;
  }
}

/// Every op `op` depends on, itself included.
std::set<int> ancestors(const graph::SummaryGraph& graph, int op) {
  std::set<int> seen{op};
  std::vector<int> frontier{op};
  while (!frontier.empty()) {
    const int o = frontier.back();
    frontier.pop_back();
    for (int p : graph.predecessors(o))
      if (seen.insert(p).second) frontier.push_back(p);
  }
  return seen;
}

std::shared_ptr<const graph::SummaryGraph> head_graph_of(torch::nn::Sequential head,
                                                         graph::Shape shape,
                                                         const std::string& name) {
  shape.at(0) = 1;
  return std::make_shared<const graph::SummaryGraph>(graph::SummaryGraph::build(
      *head, shape, [&head](const torch::Tensor& x) { return head->forward(x); }, name));
}

}  // namespace

ExitNetwork::ExitNetwork(torch::nn::Module& model, const graph::SummaryGraph& graph, bool int8)
    : graph_(&graph) {
  std::vector<std::pair<std::string, Activation>> points;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
        act && act->has_branch())
      points.emplace_back(item.key(), Activation(act));
  if (points.empty())
    throw InputError(graph.model_name() + " has no early exits (the *_earlyexit models have)");
  const int64_t batch = std::max<int64_t>(1, graph.input_shape().at(0));
  Assignment segment_of(graph.ops().size(), -1);
  std::vector<std::string> segment_names;
  for (size_t e = 0; e < points.size(); ++e) {
    const int op = graph.find(points[e].first);
    if (op < 0)
      throw InputError("the exit at '" + points[e].first + "' is not an op of " +
                       graph.model_name() + "'s graph");
    int fresh = 0;
    for (int a : ancestors(graph, op))
      if (segment_of[a] < 0) {
        segment_of[a] = static_cast<int>(e);
        ++fresh;
      }
    if (fresh == 0)
      throw InputError("the exit at '" + points[e].first + "' adds no layer to the one before");
    names_.push_back(points[e].first);
    segment_names.push_back("segment" + std::to_string(e));
    heads_.push_back(points[e].second->branch());
    exit_values_.push_back(graph.op(op).outputs.at(0));
  }
  const int last = static_cast<int>(points.size());
  for (auto& s : segment_of)
    if (s < 0) s = last;
  names_.push_back("final");
  segment_names.push_back("segment" + std::to_string(last));
  segments_ = split_stages(graph, segment_of, segment_names);
  if (segments_.size() != points.size() + 1)
    throw InputError("the final exit of " + graph.model_name() +
                     " adds no layer to the last "
                     "early exit");
  heads_.emplace_back(nullptr);
  int64_t cumulative = 0;
  for (size_t e = 0; e < segments_.size(); ++e) {
    auto& s = segments_[e];
    if (e < points.size() &&
        !std::binary_search(s.outputs.begin(), s.outputs.end(), exit_values_[e])) {
      s.outputs.push_back(exit_values_[e]);
      std::sort(s.outputs.begin(), s.outputs.end());
    }
    int64_t macs = 0;
    for (int op : s.ops) macs += graph.macs(op);
    if (e < points.size()) {
      head_graphs_.push_back(
          head_graph_of(heads_[e], graph.shape(exit_values_[e]), names_[e] + ".branch_net"));
      head_forms_.push_back(head_form(heads_[e], graph.shape(exit_values_[e]), names_[e], int8));
    }
    head_macs_.push_back(e < points.size() ? head_graphs_.back()->total_macs() : 0);
    cumulative += macs / batch + head_macs_.back();
    exit_macs_.push_back(cumulative);
    runners_.push_back(std::make_unique<StageRunner>(graph, s, /*inference=*/true, int8));
  }
  for (size_t e = 0; e < segments_.size(); ++e) {
    std::set<int> later;
    for (size_t k = e + 1; k < segments_.size(); ++k)
      later.insert(segments_[k].inputs.begin(), segments_[k].inputs.end());
    carried_.emplace_back(later.begin(), later.end());
  }
  whole_ = std::make_unique<StageRunner>(
      graph, split_stages(graph, Assignment(graph.ops().size(), 0), {"model"}).at(0),
      /*inference=*/true, int8);
}

at::Tensor ExitNetwork::run_head(size_t e, const at::Tensor& a) const {
  return head_forms_[e] ? head_forms_[e]->forward(a) : heads_[e]->forward(a);
}

std::vector<at::Tensor> ExitNetwork::run_all(const at::Tensor& x) const {
  std::map<int, at::Tensor> values{{graph_->inputs().at(0), x}};
  std::vector<at::Tensor> out;
  for (size_t e = 0; e < segments_.size(); ++e) {
    runners_[e]->run(values);
    out.push_back(e + 1 < segments_.size() ? run_head(e, values.at(exit_values_[e]))
                                           : values.at(graph_->outputs().at(0)));
    out.back() = out.back().to(at::kFloat);
  }
  return out;
}

ExitNetwork::Decision ExitNetwork::run(const at::Tensor& x, ExitCriterion criterion,
                                       const std::vector<double>& score_thresholds,
                                       const at::Tensor& target) const {
  if (score_thresholds.size() + 1 != segments_.size())
    throw InputError(std::to_string(score_thresholds.size()) + " exit thresholds for " +
                     std::to_string(segments_.size() - 1) + " early exits");
  const int64_t n = x.size(0);
  const auto long_opts = at::TensorOptions().dtype(at::kLong).device(x.device());
  Decision d;
  d.exit = at::full({n}, static_cast<int64_t>(segments_.size() - 1), long_opts);
  at::Tensor idx = at::arange(n, long_opts);
  at::Tensor labels = target;
  std::map<int, at::Tensor> values{{graph_->inputs().at(0), x}};
  for (size_t e = 0; e < segments_.size(); ++e) {
    runners_[e]->run(values);
    const bool final_exit = e + 1 == segments_.size();
    const at::Tensor logits =
        (final_exit ? values.at(graph_->outputs().at(0)) : run_head(e, values.at(exit_values_[e])))
            .to(at::kFloat);
    if (!d.logits.defined()) d.logits = at::zeros({n, logits.size(1)}, logits.options());
    if (logits.size(1) != d.logits.size(1))
      throw InputError("exit '" + names_[e] + "' gives " + std::to_string(logits.size(1)) +
                       " classes, the first exit " + std::to_string(d.logits.size(1)));
    if (final_exit) {
      d.logits.index_copy_(0, idx, logits);
      break;
    }
    const auto leave = exit_scores(logits, criterion, labels).ge(score_thresholds[e]);
    const auto gone = leave.nonzero().flatten(), stay = leave.logical_not().nonzero().flatten();
    if (gone.numel() > 0) {
      const auto rows = idx.index_select(0, gone);
      d.logits.index_copy_(0, rows, logits.index_select(0, gone));
      d.exit.index_fill_(0, rows, static_cast<int64_t>(e));
    }
    if (stay.numel() == 0) break;
    std::map<int, at::Tensor> kept;
    for (int v : carried_[e]) {
      auto it = values.find(v);
      if (it == values.end()) continue;
      kept[v] = gone.numel() > 0 ? it->second.index_select(0, stay) : it->second;
    }
    values = std::move(kept);
    if (gone.numel() > 0) {
      idx = idx.index_select(0, stay);
      if (labels.defined()) labels = labels.index_select(0, stay);
    }
  }
  return d;
}

at::Tensor ExitNetwork::run_final_only(const at::Tensor& x) const {
  std::map<int, at::Tensor> values{{graph_->inputs().at(0), x}};
  whole_->run(values);
  return values.at(graph_->outputs().at(0));
}

}  // namespace igb::deploy
