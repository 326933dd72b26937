#include "compress/activation_pruners.h"

#include <torch/csrc/jit/frontend/tracer.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <numeric>

#include "core/yaml_reader.h"

namespace igb::compress {

torch::Tensor ActivationStatisticsImpl::forward(const torch::Tensor& x) {
  auto y = observed_->forward_original(x);
  if (!is_training()) {
    restart_ = true;  // validation or a trace in eval mode: the next training forward starts anew
    return y;
  }
  if (torch::jit::tracer::isTracing()) return y;
  if (y.dim() != 4) {
    unsupported_dim_ = y.dim();
    return y;
  }
  torch::NoGradGuard no_grad;
  const auto a = y.detach().to(torch::kFloat32);
  // Per sample and channel: the fraction of non-zero values and the mean of the feature map.
  const auto nonzero = a.ne(0).to(torch::kFloat32).mean({2, 3});
  const auto apoz = (100.0 - nonzero.mean(0) * 100.0).cpu().to(torch::kFloat64);
  const auto mean = a.mean({2, 3}).mean(0).cpu().to(torch::kFloat64);
  if (restart_ || !apoz_sum_.defined() || apoz_sum_.numel() != apoz.numel()) {
    apoz_sum_ = torch::zeros_like(apoz);
    mean_sum_ = torch::zeros_like(mean);
    batches_ = 0;
    restart_ = false;
  }
  apoz_sum_ += apoz;
  mean_sum_ += mean;
  ++batches_;
  return y;
}

std::shared_ptr<ActivationStatisticsImpl> ActivationStatisticsImpl::attach(
    ActivationImpl& activation) {
  if (activation.replaced()) {
    for (const auto& child : activation.named_children())
      if (child.key() == "replacement")
        return std::dynamic_pointer_cast<ActivationStatisticsImpl>(child.value());
    return nullptr;
  }
  ActivationStatistics stats(&activation);
  activation.replace(torch::nn::AnyModule(stats));
  return stats.ptr();
}

at::Tensor ActivationStatisticsImpl::apoz() const {
  return batches_ ? apoz_sum_ / static_cast<double>(batches_) : at::Tensor();
}

at::Tensor ActivationStatisticsImpl::mean() const {
  return batches_ ? mean_sum_ / static_cast<double>(batches_) : at::Tensor();
}

ActivationRankedFilterPruner::ActivationRankedFilterPruner(
    std::string name, FilterPrunerOptions options, ActivationCriterion criterion,
    std::vector<std::shared_ptr<ActivationStatisticsImpl>> statistics,
    std::vector<std::string> activation_names)
    : Pruner(std::move(name)),
      options_(std::move(options)),
      criterion_(criterion),
      statistics_(std::move(statistics)),
      activation_names_(std::move(activation_names)) {}

std::string ActivationRankedFilterPruner::activation_name(const std::string& weight) {
  // Distiller's names start with the "module." of DataParallel, which ours drop: a leading "conv"
  // counts as ".conv" too.
  std::string out = "." + weight;
  for (size_t at = out.find(".conv"); at != std::string::npos; at = out.find(".conv", at + 5))
    out.replace(at, 5, ".relu");
  out.erase(0, 1);
  const std::string suffix = ".weight";
  if (out.size() >= suffix.size() &&
      out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0)
    out.resize(out.size() - suffix.size());
  return out;
}

void ActivationRankedFilterPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                                             const PolicyTiming& timing) {
  const double fraction = options_.fraction(epoch, timing);
  if (fraction == 0) return;
  const auto& weights = options_.weights();
  MaskTable fresh;
  std::vector<int64_t> leader_choice;
  for (size_t i = 0; i < weights.size(); ++i) {
    const auto& w = params.at(weights[i]);
    std::vector<int64_t> pruned;
    if (options_.leader() && i > 0) {
      pruned = leader_choice;
    } else {
      const auto& stats = *statistics_[i];
      const auto& act = activation_names_[i];
      if (stats.unsupported_dim())
        throw InputError("pruner " + name() + ": " + act + " gave a " +
                         std::to_string(stats.unsupported_dim()) +
                         "-D output; activation ranking reads 4-D feature maps");
      if (stats.batches() == 0)
        throw InputError("pruner " + name() + ": no activation statistics of " + act +
                         " yet to rank the filters of " + weights[i] +
                         ": its policy acts before any training batch has run (Distiller fails "
                         "here too); start it after the first epoch");
      auto value = criterion_ == ActivationCriterion::kApoz ? stats.apoz() : -stats.mean();
      if (reduce_) value = reduce_(value);
      const int64_t n = w.size(0);
      if (value.numel() != n)
        throw std::runtime_error("pruner " + name() + ": the statistics of " + act + " have " +
                                 std::to_string(value.numel()) + " channels but " + weights[i] +
                                 " has " + std::to_string(n) + " filters");
      const int64_t k = structures_to_prune(n, fraction);
      if (k == 0) return;
      // The k worst (highest APoZ, lowest mean) go; a stable order breaks ties by filter index.
      const auto v = value.contiguous();
      const double* p = v.data_ptr<double>();
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [p](int64_t a, int64_t b) { return p[a] < p[b]; });
      pruned.assign(order.end() - k, order.end());
      std::sort(pruned.begin(), pruned.end());
      leader_choice = pruned;
    }
    mask_groups(params, fresh, weights[i], GroupType::kFilters, pruned, w);
  }
  for (auto& [name, mask] : fresh) masks[name] = std::move(mask);
}

nlohmann::json ActivationRankedFilterPruner::hyperparams() const {
  std::string cls = criterion_ == ActivationCriterion::kApoz ? "ActivationAPoZRankedFilterPruner"
                                                             : "ActivationMeanRankedFilterPruner";
  if (options_.agp()) cls += "_AGP";
  nlohmann::json out = {{"class", cls}};
  out.update(options_.to_json());
  return out;
}

namespace {

std::unique_ptr<Pruner> make_activation_pruner(const std::string& name, YamlReader& y,
                                               const ModelParams& params,
                                               ActivationCriterion criterion, bool agp) {
  auto options = FilterPrunerOptions::from_yaml(y, params, agp);
  std::vector<std::shared_ptr<ActivationStatisticsImpl>> statistics;
  std::vector<std::string> names;
  const auto modules = params.model().named_modules("", /*include_self=*/false);
  for (const auto& weight : options.weights()) {
    const auto act_name = ActivationRankedFilterPruner::activation_name(weight);
    const auto where = y.where("weights") + ": " + y.path() + ": " + weight;
    auto* found = modules.find(act_name);
    auto* act = found ? dynamic_cast<ActivationImpl*>(found->get()) : nullptr;
    if (!act)
      throw InputError(where + " is ranked by the activations of module '" + act_name +
                       "' (Distiller's rule: '.conv' becomes '.relu'), and the model has " +
                       (found ? "no activation" : "no module") + " of that name");
    const auto kind = act->options().kind();
    if (kind != ActivationKind::kReLU && kind != ActivationKind::kReLU6 &&
        kind != ActivationKind::kLeakyReLU)
      throw InputError(where + ": " + act_name + " is a " + igb::activation_name(kind) +
                       "; Distiller collects these statistics on ReLU, ReLU6 and LeakyReLU only");
    auto stats = ActivationStatisticsImpl::attach(*act);
    if (!stats)
      throw InputError(where + ": " + act_name +
                       " already has a replacement (a quantizer's), so its activations cannot "
                       "be observed");
    statistics.push_back(std::move(stats));
    names.push_back(act_name);
  }
  return std::make_unique<ActivationRankedFilterPruner>(name, std::move(options), criterion,
                                                        std::move(statistics), std::move(names));
}

}  // namespace

void register_activation_pruners(Registry<PrunerFactory>& r) {
  const std::string keys = "group_type: Filters, desired_sparsity, weights [, group_dependency]";
  const std::string agp_keys =
      "initial_sparsity, final_sparsity, group_type: Filters, weights [, group_dependency]";
  for (const auto criterion : {ActivationCriterion::kApoz, ActivationCriterion::kMean}) {
    const bool apoz = criterion == ActivationCriterion::kApoz;
    const std::string cls =
        apoz ? "ActivationAPoZRankedFilterPruner" : "ActivationMeanRankedFilterPruner";
    const std::string what = apoz ? ": prunes the filters whose ReLU outputs are most often zero"
                                  : ": prunes the filters whose ReLU outputs have the lowest mean";
    for (const bool agp : {false, true})
      r.add(
          agp ? cls + "_AGP" : cls,
          [criterion, agp](const std::string& n, YamlReader& y, const ModelParams& p) {
            return make_activation_pruner(n, y, p, criterion, agp);
          },
          (agp ? agp_keys : keys) + what + " over the training batches");
  }
}

}  // namespace igb::compress
