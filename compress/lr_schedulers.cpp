#include "compress/lr_schedulers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "core/yaml_reader.h"

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

CosineAnnealingWarmRestartsOptions CosineAnnealingWarmRestartsOptions::from_yaml(YamlReader& y) {
  CosineAnnealingWarmRestartsOptions o(y.get<int64_t>("T_0"));
  o.T_mult(y.get<int64_t>("T_mult", o.T_mult()));
  o.eta_min(y.get<double>("eta_min", o.eta_min()));
  if (o.T_0() <= 0) throw InputError(y.where("T_0") + ": " + y.path() + ".T_0 must be positive");
  if (o.T_mult() < 1)
    throw InputError(y.where("T_mult") + ": " + y.path() + ".T_mult must be an integer >= 1");
  y.finish();
  return o;
}

nlohmann::json CosineAnnealingWarmRestartsOptions::to_json() const {
  return {{"T_0", T_0_}, {"T_mult", T_mult_}, {"eta_min", eta_min_}};
}

ReduceLROnPlateauOptions ReduceLROnPlateauOptions::from_yaml(YamlReader& y) {
  ReduceLROnPlateauOptions o;
  auto choice = [&](const std::string& key, const std::string& fallback, const char* a,
                    const char* b) {
    auto v = y.get<std::string>(key, fallback);
    if (v != a && v != b)
      throw InputError(y.where(key) + ": " + y.path() + "." + key + " is '" + v + "'; valid: " + a +
                       ", " + b);
    return v;
  };
  auto non_negative = [&](const std::string& key, auto v) {
    if (!(v >= 0)) throw InputError(y.where(key) + ": " + y.path() + "." + key + " must be >= 0");
    return v;
  };
  o.mode(choice("mode", o.mode(), "min", "max"));
  o.factor(y.get<double>("factor", o.factor()));
  if (!(o.factor() >= 0 && o.factor() < 1))
    throw InputError(y.where("factor") + ": " + y.path() + ".factor must be >= 0 and < 1");
  o.patience(non_negative("patience", y.get<int64_t>("patience", o.patience())));
  o.threshold(non_negative("threshold", y.get<double>("threshold", o.threshold())));
  o.threshold_mode(choice("threshold_mode", o.threshold_mode(), "rel", "abs"));
  o.cooldown(non_negative("cooldown", y.get<int64_t>("cooldown", o.cooldown())));
  o.min_lr(non_negative("min_lr", y.get<double>("min_lr", o.min_lr())));
  o.eps(non_negative("eps", y.get<double>("eps", o.eps())));
  o.verbose(y.get<bool>("verbose", o.verbose()));
  y.finish();
  return o;
}

nlohmann::json ReduceLROnPlateauOptions::to_json() const {
  return {{"mode", mode_},
          {"factor", factor_},
          {"patience", patience_},
          {"threshold", threshold_},
          {"threshold_mode", threshold_mode_},
          {"cooldown", cooldown_},
          {"min_lr", min_lr_},
          {"eps", eps_},
          {"verbose", verbose_}};
}

// --- schedulers ----------------------------------------------------------------------------------

nlohmann::json LrScheduler::state() const { return nullptr; }

double StepLR::lr(double b, int64_t e) const {
  return b * std::pow(options_.gamma(), e / options_.step_size());
}

nlohmann::json StepLR::hyperparams() const { return with_class("StepLR", options_.to_json()); }

double MultiStepLR::lr(double b, int64_t e) const {
  const auto& m = options_.milestones();
  auto passed = std::upper_bound(m.begin(), m.end(), e) - m.begin();
  return b * std::pow(options_.gamma(), static_cast<double>(passed));
}

nlohmann::json MultiStepLR::hyperparams() const {
  return with_class("MultiStepLR", options_.to_json());
}

double ExponentialLR::lr(double b, int64_t e) const { return b * std::pow(options_.gamma(), e); }

nlohmann::json ExponentialLR::hyperparams() const {
  return with_class("ExponentialLR", options_.to_json());
}

double CosineAnnealingLR::lr(double b, int64_t e) const {
  const double eta_min = options_.eta_min();
  return eta_min +
         (b - eta_min) * (1 + std::cos(M_PI * static_cast<double>(e) / options_.T_max())) / 2;
}

nlohmann::json CosineAnnealingLR::hyperparams() const {
  return with_class("CosineAnnealingLR", options_.to_json());
}

double PolynomialLR::lr(double b, int64_t e) const {
  return b *
         std::pow(std::max(0.0, 1.0 - static_cast<double>(e) / options_.T_max()), options_.power());
}

nlohmann::json PolynomialLR::hyperparams() const {
  return with_class("PolynomialLR", options_.to_json());
}

double MultiStepMultiGammaLR::lr(double b, int64_t e) const {
  const auto& m = options_.milestones();
  for (size_t i = 0; i < m.size() && m[i] <= e; ++i) b *= options_.gammas()[i];
  return b;
}

nlohmann::json MultiStepMultiGammaLR::hyperparams() const {
  return with_class("MultiStepMultiGammaLR", options_.to_json());
}

double CosineAnnealingWarmRestarts::lr(double b, int64_t e) const {
  // The period holding epoch e, found in integers (a floating logarithm misplaces the restarts).
  int64_t start = 0, length = options_.T_0();
  while (e >= start + length) {
    start += length;
    length *= options_.T_mult();
  }
  const double eta_min = options_.eta_min();
  return eta_min +
         (b - eta_min) *
             (1 + std::cos(M_PI * static_cast<double>(e - start) / static_cast<double>(length))) /
             2;
}

nlohmann::json CosineAnnealingWarmRestarts::hyperparams() const {
  return with_class("CosineAnnealingWarmRestarts", options_.to_json());
}

bool ReduceLROnPlateau::improves(double metric) const {
  if (!best_) return !std::isnan(metric);
  const double best = *best_, t = options_.threshold();
  const bool rel = options_.threshold_mode() == "rel";
  if (options_.mode() == "min") return metric < (rel ? best * (1 - t) : best - t);
  return metric > (rel ? best * (1 + t) : best + t);
}

double ReduceLROnPlateau::step(const LrStep& s) {
  if (improves(s.metric)) {
    best_ = s.metric;
    bad_epochs_ = 0;
  } else {
    ++bad_epochs_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_epochs_ = 0;
  }
  if (bad_epochs_ <= options_.patience()) return s.current_lr;
  cooldown_left_ = options_.cooldown();
  bad_epochs_ = 0;
  const double reduced = std::max(s.current_lr * options_.factor(), options_.min_lr());
  return s.current_lr - reduced > options_.eps() ? reduced : s.current_lr;
}

nlohmann::json ReduceLROnPlateau::state() const {
  return {{"best", best_ ? nlohmann::json(*best_) : nlohmann::json(nullptr)},
          {"bad_epochs", bad_epochs_},
          {"cooldown_left", cooldown_left_}};
}

void ReduceLROnPlateau::load_state(const nlohmann::json& state) {
  const auto& best = state.at("best");
  best_ = best.is_null() ? std::nullopt : std::optional<double>(best.get<double>());
  bad_epochs_ = state.at("bad_epochs").get<int64_t>();
  cooldown_left_ = state.at("cooldown_left").get<int64_t>();
}

nlohmann::json ReduceLROnPlateau::hyperparams() const {
  return with_class("ReduceLROnPlateau", options_.to_json());
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
    r.add(
        "CosineAnnealingWarmRestarts",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<CosineAnnealingWarmRestarts>(
              CosineAnnealingWarmRestartsOptions::from_yaml(y));
        },
        "T_0, T_mult (1), eta_min (0)");
    r.add(
        "ReduceLROnPlateau",
        [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
          return std::make_unique<ReduceLROnPlateau>(ReduceLROnPlateauOptions::from_yaml(y));
        },
        "mode (min: validation loss, max: primary metric), factor (0.1), patience (10), "
        "threshold (1e-4), threshold_mode (rel), cooldown (0), min_lr (0), eps (1e-8), "
        "verbose (false)");
    r.freeze();
  });
}

}  // namespace igb::compress
