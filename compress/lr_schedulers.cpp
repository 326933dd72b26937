#include "compress/lr_schedulers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "compress/yaml_reader.h"

namespace igb::compress {

namespace {

std::vector<int64_t> read_milestones(YamlReader& r) {
  auto m = r.get<std::vector<int64_t>>("milestones");
  if (!std::is_sorted(m.begin(), m.end()))
    throw InputError(r.where("milestones") + ": " + r.path() + ".milestones must be increasing");
  return m;
}

double positive(YamlReader& r, const std::string& key, double v) {
  if (!(v > 0)) throw InputError(r.where(key) + ": " + r.path() + "." + key + " must be positive");
  return v;
}

nlohmann::json with_class(const std::string& cls, nlohmann::json options) {
  nlohmann::json out = {{"class", cls}};
  out.update(options);
  return out;
}

}  // namespace

// --- options -------------------------------------------------------------------------------------

StepLROptions StepLROptions::from_yaml(YamlReader& y) {
  StepLROptions o(y.get<int64_t>("step_size"));
  o.gamma(y.get<double>("gamma", o.gamma()));
  if (o.step_size() <= 0) throw InputError(y.where("step_size") + ": step_size must be positive");
  y.finish();
  return o;
}

nlohmann::json StepLROptions::to_json() const {
  return {{"step_size", step_size_}, {"gamma", gamma_}};
}

MultiStepLROptions MultiStepLROptions::from_yaml(YamlReader& y) {
  MultiStepLROptions o(read_milestones(y));
  o.gamma(y.get<double>("gamma", o.gamma()));
  y.finish();
  return o;
}

nlohmann::json MultiStepLROptions::to_json() const {
  return {{"milestones", milestones_}, {"gamma", gamma_}};
}

ExponentialLROptions ExponentialLROptions::from_yaml(YamlReader& y) {
  ExponentialLROptions o(y.get<double>("gamma"));
  y.finish();
  return o;
}

nlohmann::json ExponentialLROptions::to_json() const { return {{"gamma", gamma_}}; }

CosineAnnealingLROptions CosineAnnealingLROptions::from_yaml(YamlReader& y) {
  CosineAnnealingLROptions o(positive(y, "T_max", y.get<double>("T_max")));
  o.eta_min(y.get<double>("eta_min", o.eta_min()));
  y.finish();
  return o;
}

nlohmann::json CosineAnnealingLROptions::to_json() const {
  return {{"T_max", T_max_}, {"eta_min", eta_min_}};
}

PolynomialLROptions PolynomialLROptions::from_yaml(YamlReader& y) {
  PolynomialLROptions o(positive(y, "T_max", y.get<double>("T_max")));
  o.power(y.get<double>("power", o.power()));
  y.finish();
  return o;
}

nlohmann::json PolynomialLROptions::to_json() const {
  return {{"T_max", T_max_}, {"power", power_}};
}

MultiStepMultiGammaLROptions MultiStepMultiGammaLROptions::from_yaml(YamlReader& y) {
  MultiStepMultiGammaLROptions o;
  o.milestones(read_milestones(y));
  o.gammas(y.get<std::vector<double>>("gammas"));
  if (o.gammas().size() != o.milestones().size())
    throw InputError(y.where("gammas") + ": " + y.path() + " needs one gamma per milestone");
  y.finish();
  return o;
}

nlohmann::json MultiStepMultiGammaLROptions::to_json() const {
  return {{"milestones", milestones_}, {"gammas", gammas_}};
}

// --- schedulers ----------------------------------------------------------------------------------

double StepLR::lr(double b, int64_t s) const {
  return b * std::pow(options_.gamma(), s / options_.step_size());
}

nlohmann::json StepLR::hyperparams() const { return with_class("StepLR", options_.to_json()); }

double MultiStepLR::lr(double b, int64_t s) const {
  const auto& m = options_.milestones();
  auto passed = std::upper_bound(m.begin(), m.end(), s) - m.begin();
  return b * std::pow(options_.gamma(), static_cast<double>(passed));
}

nlohmann::json MultiStepLR::hyperparams() const {
  return with_class("MultiStepLR", options_.to_json());
}

double ExponentialLR::lr(double b, int64_t s) const { return b * std::pow(options_.gamma(), s); }

nlohmann::json ExponentialLR::hyperparams() const {
  return with_class("ExponentialLR", options_.to_json());
}

double CosineAnnealingLR::lr(double b, int64_t s) const {
  const double eta_min = options_.eta_min();
  return eta_min +
         (b - eta_min) * (1 + std::cos(M_PI * static_cast<double>(s) / options_.T_max())) / 2;
}

nlohmann::json CosineAnnealingLR::hyperparams() const {
  return with_class("CosineAnnealingLR", options_.to_json());
}

double PolynomialLR::lr(double b, int64_t s) const {
  return b *
         std::pow(std::max(0.0, 1.0 - static_cast<double>(s) / options_.T_max()), options_.power());
}

nlohmann::json PolynomialLR::hyperparams() const {
  return with_class("PolynomialLR", options_.to_json());
}

double MultiStepMultiGammaLR::lr(double b, int64_t s) const {
  const auto& m = options_.milestones();
  for (size_t i = 0; i < m.size() && m[i] <= s; ++i) b *= options_.gammas()[i];
  return b;
}

nlohmann::json MultiStepMultiGammaLR::hyperparams() const {
  return with_class("MultiStepMultiGammaLR", options_.to_json());
}

// --- registry ------------------------------------------------------------------------------------

Registry<LrSchedulerFactory>& lr_scheduler_registry() {
  static Registry<LrSchedulerFactory> r("LR scheduler class");
  return r;
}

void register_builtin_lr_schedulers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = lr_scheduler_registry();
    r.add(
        "StepLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<StepLR>(StepLROptions::from_yaml(y));
        },
        "step_size, gamma (0.1)");
    r.add(
        "MultiStepLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<MultiStepLR>(MultiStepLROptions::from_yaml(y));
        },
        "milestones, gamma (0.1)");
    r.add(
        "ExponentialLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<ExponentialLR>(ExponentialLROptions::from_yaml(y));
        },
        "gamma");
    r.add(
        "CosineAnnealingLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<CosineAnnealingLR>(CosineAnnealingLROptions::from_yaml(y));
        },
        "T_max, eta_min (0)");
    r.add(
        "PolynomialLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<PolynomialLR>(PolynomialLROptions::from_yaml(y));
        },
        "T_max, power (1)");
    r.add(
        "MultiStepMultiGammaLR",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<MultiStepMultiGammaLR>(
              MultiStepMultiGammaLROptions::from_yaml(y));
        },
        "milestones, gammas");
    r.freeze();
  });
}

}  // namespace igb::compress
