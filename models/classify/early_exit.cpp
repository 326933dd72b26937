#include "models/classify/early_exit.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>
#include <torch/utils.h>

#include <ATen/ops/cross_entropy_loss.h>

#include <cmath>

#include "core/error.h"
#include "core/table.h"
#include "core/train_mode_guard.h"
#include "models/model.h"

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

torch::nn::Sequential pooled_linear_head(int64_t channels, int64_t pool, int64_t classes) {
  return torch::nn::Sequential(
      torch::nn::AdaptiveAvgPool2d(torch::nn::AdaptiveAvgPool2dOptions(pool)), torch::nn::Flatten(),
      torch::nn::Linear(channels * pool * pool, classes));
}

nlohmann::json take_exit_args(nlohmann::json& options) {
  nlohmann::json args = nlohmann::json::object();
  if (!options.is_object()) return args;
  if (options.contains("exits")) {
    if (!options["exits"].is_string())
      throw InputError("model option 'exits' is a list of activations separated by commas");
    args["exits"] = options["exits"];
    options.erase("exits");
  }
  if (options.contains("exit_pool")) {
    const auto& v = options["exit_pool"];
    int64_t pool = 0;
    try {
      pool = v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
    } catch (const std::exception&) {
      pool = 0;
    }
    if (pool < 1 || pool > 16)
      throw InputError("model option 'exit_pool' must be an integer from 1 to 16, got " + v.dump());
    if (!args.contains("exits"))
      throw InputError("model option 'exit_pool' needs 'exits' (the activations to branch from)");
    args["exit_pool"] = pool;
    options.erase("exit_pool");
  }
  return args;
}

void attach_exit_args(torch::nn::Module& model, const nlohmann::json& args,
                      const std::vector<int64_t>& input_shape, int64_t classes) {
  if (!args.contains("exits")) return;
  std::vector<std::string> names;
  std::string text = args["exits"].get<std::string>();
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) names.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  if (names.empty()) throw InputError("model option 'exits' names no activation");
  const int64_t pool = args.value("exit_pool", int64_t{2});
  // The channel count at each exit: a probe head that passes the feature map through.
  std::vector<ExitSpec> probes;
  for (const auto& n : names) probes.push_back({n, torch::nn::Sequential(torch::nn::Identity())});
  attach_exits(model, probes);
  std::vector<at::Tensor> outs;
  {
    torch::NoGradGuard no_grad;
    TrainModeGuard eval(model, /*train=*/false);
    auto* m = dynamic_cast<ModelImpl*>(&model);
    if (!m) throw InputError("exits attach to a model of the zoo");
    outs = forward_exits(
        model, [m](const at::Tensor& x) { return m->forward(x); }, torch::zeros(input_shape));
  }
  std::vector<ExitSpec> heads;
  auto points = exit_points(model);
  for (size_t i = 0; i < points.size(); ++i) {
    const auto& o = outs.at(i);
    if (o.dim() != 4)
      throw InputError("the exit at '" + points[i].first +
                       "' needs a feature map [N, C, H, W]; its activation gives " +
                       std::to_string(o.dim()) + " dimensions");
    if (std::find(names.begin(), names.end(), points[i].first) != names.end())
      heads.push_back({points[i].first, pooled_linear_head(o.size(1), pool, classes)});
  }
  attach_exits(model, heads);
}

namespace {

int64_t strided(int64_t n, int64_t k, int64_t s, int64_t p) { return (n + 2 * p - k) / s + 1; }

torch::nn::Sequential resnet50_head(int64_t in, int64_t out, int64_t side, int64_t classes) {
  const int64_t a = strided(strided(side, 7, 2, 3), 3, 2, 1);
  return torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 7).stride(2).padding(3).bias(true)),
      torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)),
      torch::nn::Flatten(), torch::nn::Linear(out * a * a, classes));
}

}  // namespace

std::vector<ExitSpec> distiller_resnet50_exits(int64_t classes, int64_t input_size) {
  // conv1 (7, stride 2, padding 3) and the max pool (3, 2, 1) give layer1's side; layer2 halves it.
  const int64_t layer1 = strided(strided(input_size, 7, 2, 3), 3, 2, 1);
  const int64_t layer2 = strided(layer1, 3, 2, 1);
  return {{"layer1.2.relu3", resnet50_head(256, 10, layer1, classes)},
          {"layer2.3.relu3", resnet50_head(512, 12, layer2, classes)}};
}

}  // namespace igb::models::classify
