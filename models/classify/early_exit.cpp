#include "models/classify/early_exit.h"

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <ATen/ops/cross_entropy_loss.h>

#include <cmath>

#include "core/error.h"
#include "core/table.h"

namespace igb::models::classify {

void attach_exits(torch::nn::Module& model, const std::vector<ExitSpec>& exits) {
  std::vector<std::string> activations;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (std::dynamic_pointer_cast<ActivationImpl>(item.value())) activations.push_back(item.key());
  for (const auto& e : exits) {
    std::shared_ptr<ActivationImpl> act;
    for (const auto& item : model.named_modules("", false))
      if (item.key() == e.point) act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
    if (!act)
      throw InputError("cannot attach an exit at '" + e.point +
                       "': exits branch from an activation module; closest: " +
                       join(closest_names(e.point, activations)));
    if (e.head.is_empty()) throw InputError("the exit at '" + e.point + "' has no head");
    act->attach_branch(e.head);
  }
}

std::vector<std::pair<std::string, Activation>> exit_points(torch::nn::Module& model) {
  std::vector<std::pair<std::string, Activation>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
        act && act->has_branch())
      out.emplace_back(item.key(), Activation(act));
  return out;
}

std::vector<at::Tensor> forward_exits(torch::nn::Module& model,
                                      const std::function<at::Tensor(const at::Tensor&)>& forward,
                                      const at::Tensor& x) {
  auto points = exit_points(model);
  struct Enable {
    std::vector<std::pair<std::string, Activation>>& p;
    explicit Enable(std::vector<std::pair<std::string, Activation>>& points) : p(points) {
      for (auto& [name, act] : p) {
        act->take_branch_output();
        act->set_branch_enabled(true);
      }
    }
    ~Enable() {
      for (auto& [name, act] : p) act->set_branch_enabled(false);
    }
  } enable(points);
  const at::Tensor final_output = forward(x);
  std::vector<at::Tensor> out;
  for (auto& [name, act] : points) {
    at::Tensor y = act->take_branch_output();
    if (!y.defined()) throw InputError("the forward pass did not reach the exit at '" + name + "'");
    out.push_back(y);
  }
  out.push_back(final_output);
  return out;
}

void check_earlyexit_options(const std::string& model, size_t exits,
                             const std::vector<double>& lossweights,
                             const std::vector<double>& thresholds) {
  const auto count = [](size_t n) {
    return std::to_string(n) + (n == 1 ? " early exit" : " early exits");
  };
  if (exits == 0) {
    if (!lossweights.empty() || !thresholds.empty())
      throw InputError(
          std::string(lossweights.empty() ? "--earlyexit_thresholds" : "--earlyexit_lossweights") +
          ": " + model + " has no early exits (the *_earlyexit models have)");
    return;
  }
  if (lossweights.size() != exits)
    throw InputError("--earlyexit_lossweights: " + model + " has " + count(exits) + ", give " +
                     std::to_string(exits) + (exits == 1 ? " weight" : " weights") + " (got " +
                     std::to_string(lossweights.size()) + ")");
  double sum = 0;
  for (double w : lossweights) {
    if (!std::isfinite(w) || w < 0)
      throw InputError("--earlyexit_lossweights: " + fixed(w, 3) +
                       " is not a weight (each is at least 0)");
    sum += w;
  }
  if (sum >= 1)
    throw InputError("--earlyexit_lossweights sum to " + fixed(sum, 3) +
                     "; they must sum to less than 1 (the final exit gets 1 - their sum)");
  if (!thresholds.empty() && thresholds.size() != exits)
    throw InputError("--earlyexit_thresholds: " + model + " has " + count(exits) + ", give " +
                     std::to_string(exits) + " (got " + std::to_string(thresholds.size()) + ")");
  for (double t : thresholds)
    if (!std::isfinite(t))
      throw InputError("--earlyexit_thresholds: a threshold is not a finite number");
}

at::Tensor earlyexit_loss(const std::vector<at::Tensor>& outputs, const at::Tensor& target,
                          const std::vector<double>& lossweights) {
  if (outputs.size() != lossweights.size() + 1)
    throw InputError("early-exit loss: " + std::to_string(outputs.size()) + " outputs for " +
                     std::to_string(lossweights.size()) + " exit weights");
  double sum = 0;
  at::Tensor loss;
  for (size_t i = 0; i < lossweights.size(); ++i) {
    const auto term = at::cross_entropy_loss(outputs[i], target) * lossweights[i];
    loss = loss.defined() ? loss + term : term;
    sum += lossweights[i];
  }
  const auto final_term = at::cross_entropy_loss(outputs.back(), target) * (1.0 - sum);
  return loss.defined() ? loss + final_term : final_term;
}

DistillerExitStats::DistillerExitStats(size_t early_exits, std::vector<double> thresholds)
    : thresholds_(std::move(thresholds)),
      taken_(early_exits + 1),
      hit1_(early_exits + 1),
      hit5_(early_exits + 1),
      hit1_all_(early_exits + 1),
      batches_(early_exits + 1),
      loss_sum_(early_exits + 1) {
  if (!thresholds_.empty() && thresholds_.size() != early_exits)
    throw InputError("early-exit statistics: " + std::to_string(thresholds_.size()) +
                     " thresholds for " + std::to_string(early_exits) + " early exits");
}

void DistillerExitStats::add(const std::vector<at::Tensor>& outputs, const at::Tensor& target) {
  const size_t n_exits = taken_.size();
  if (outputs.size() != n_exits)
    throw InputError("early-exit statistics: " + std::to_string(outputs.size()) + " outputs for " +
                     std::to_string(n_exits) + " exits");
  const int64_t batch = target.size(0);
  std::vector<at::Tensor> losses, hits1, hits5;
  for (size_t e = 0; e < n_exits; ++e) {
    const auto logits = outputs[e].to(at::kFloat).cpu();
    const auto t = target.cpu();
    const auto l = at::cross_entropy_loss(logits, t, {}, at::Reduction::None);
    loss_sum_[e] += l.mean().item<double>();
    ++batches_[e];
    const int64_t k = std::min<int64_t>(5, logits.size(1));
    const auto hit = std::get<1>(logits.topk(k, 1)).eq(t.unsqueeze(1));
    hits1.push_back(hit.narrow(1, 0, 1).squeeze(1).contiguous());
    hits5.push_back(hit.any(1).contiguous());
    hit1_all_[e] += hits1.back().sum().item<int64_t>();
    losses.push_back(l.contiguous());
  }
  for (int64_t i = 0; i < batch; ++i) {
    size_t e = 0;
    while (e + 1 < n_exits &&
           !(!thresholds_.empty() && losses[e].data_ptr<float>()[i] < thresholds_[e]))
      ++e;
    ++taken_[e];
    hit1_[e] += hits1[e].data_ptr<bool>()[i] ? 1 : 0;
    hit5_[e] += hits5[e].data_ptr<bool>()[i] ? 1 : 0;
  }
  samples_ += batch;
}

std::vector<DistillerExitStats::Exit> DistillerExitStats::exits() const {
  std::vector<Exit> out(taken_.size());
  for (size_t e = 0; e < out.size(); ++e) {
    const auto pct = [&](int64_t hits, int64_t of) {
      return of > 0 ? 100.0 * static_cast<double>(hits) / static_cast<double>(of) : 0.0;
    };
    out[e].taken = taken_[e];
    out[e].top1 = pct(hit1_[e], taken_[e]);
    out[e].top5 = pct(hit5_[e], taken_[e]);
    out[e].loss = batches_[e] ? loss_sum_[e] / static_cast<double>(batches_[e]) : 0.0;
    out[e].top1_all = pct(hit1_all_[e], samples_);
  }
  return out;
}

double DistillerExitStats::top1() const {
  int64_t hits = 0;
  for (int64_t h : hit1_) hits += h;
  return samples_ ? 100.0 * static_cast<double>(hits) / static_cast<double>(samples_) : 0.0;
}

double DistillerExitStats::top5() const {
  int64_t hits = 0;
  for (int64_t h : hit5_) hits += h;
  return samples_ ? 100.0 * static_cast<double>(hits) / static_cast<double>(samples_) : 0.0;
}

std::vector<std::string> DistillerExitStats::report() const {
  std::vector<std::string> lines;
  const auto ex = exits();
  for (size_t e = 0; e < ex.size(); ++e)
    if (ex[e].taken)
      lines.push_back("Exit " + std::to_string(e) + ": " + std::to_string(ex[e].taken));
  for (size_t e = 0; e < ex.size(); ++e)
    if (ex[e].taken)
      lines.push_back("Percent Early Exit " + std::to_string(e) + ": " +
                      fixed(100.0 * static_cast<double>(ex[e].taken) /
                                static_cast<double>(std::max<int64_t>(1, samples_)),
                            3));
  for (size_t e = 0; e < ex.size(); ++e)
    lines.push_back("Accuracy Stats for exit " + std::to_string(e) +
                    ": top1 = " + fixed(ex[e].top1, 3) + ", top5 = " + fixed(ex[e].top5, 3) +
                    " (every sample: top1 = " + fixed(ex[e].top1_all, 3) + ")");
  lines.push_back("Totals for entire network with early exits: top1 = " + fixed(top1(), 3) +
                  ", top5 = " + fixed(top5(), 3) +
                  (thresholds_.empty() ? "" : " (exits chosen by the loss against the label)"));
  return lines;
}

std::vector<ExitSpec> distiller_resnet_cifar_exits(int64_t classes, int64_t input_size) {
  const int64_t side = input_size / 3;
  if (side < 1)
    throw InputError("Distiller's ResNet-CIFAR exit needs an input of at least 3 pixels");
  torch::nn::Sequential head(torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(3)),
                             torch::nn::Flatten(), torch::nn::Linear(16 * side * side, classes));
  return {{"layer1.2.relu2", head}};
}

}  // namespace igb::models::classify
