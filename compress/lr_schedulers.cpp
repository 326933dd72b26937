#include "compress/lr_schedulers.h"

#include <algorithm>
#include <cmath>
#include <mutex>

#include "compress/yaml_reader.h"

namespace igb::compress {

namespace {

class FnScheduler : public LrScheduler {
 public:
  explicit FnScheduler(std::function<double(double, int64_t)> f) : f_(std::move(f)) {}
  double lr(double base, int64_t steps) const override { return f_(base, steps); }

 private:
  std::function<double(double, int64_t)> f_;
};

std::vector<int64_t> milestones(YamlReader& r) {
  auto m = r.get<std::vector<int64_t>>("milestones");
  if (!std::is_sorted(m.begin(), m.end()))
    throw InputError(r.where("milestones") + ": " + r.path() + ".milestones must be increasing");
  return m;
}

double positive(YamlReader& r, const std::string& key, double v) {
  if (!(v > 0)) throw InputError(r.where(key) + ": " + r.path() + "." + key + " must be positive");
  return v;
}

}  // namespace

Registry<LrSchedulerFactory>& lr_scheduler_registry() {
  static Registry<LrSchedulerFactory> r("LR scheduler class");
  return r;
}

void register_builtin_lr_schedulers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = lr_scheduler_registry();
    r.add("StepLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      auto step = y.get<int64_t>("step_size");
      double gamma = y.get<double>("gamma", 0.1);
      if (step <= 0) throw InputError(y.where("step_size") + ": step_size must be positive");
      return std::make_unique<FnScheduler>([=](double b, int64_t s) { return b * std::pow(gamma, s / step); });
    }, "step_size, gamma (0.1)");
    r.add("MultiStepLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      auto m = milestones(y);
      double gamma = y.get<double>("gamma", 0.1);
      return std::make_unique<FnScheduler>([=](double b, int64_t s) {
        auto passed = std::upper_bound(m.begin(), m.end(), s) - m.begin();
        return b * std::pow(gamma, static_cast<double>(passed));
      });
    }, "milestones, gamma (0.1)");
    r.add("ExponentialLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      double gamma = y.get<double>("gamma");
      return std::make_unique<FnScheduler>([=](double b, int64_t s) { return b * std::pow(gamma, s); });
    }, "gamma");
    r.add("CosineAnnealingLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      double t_max = positive(y, "T_max", y.get<double>("T_max"));
      double eta_min = y.get<double>("eta_min", 0.0);
      return std::make_unique<FnScheduler>([=](double b, int64_t s) {
        return eta_min + (b - eta_min) * (1 + std::cos(M_PI * static_cast<double>(s) / t_max)) / 2;
      });
    }, "T_max, eta_min (0)");
    r.add("PolynomialLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      double t_max = positive(y, "T_max", y.get<double>("T_max"));
      double power = y.get<double>("power", 1.0);
      return std::make_unique<FnScheduler>([=](double b, int64_t s) {
        return b * std::pow(std::max(0.0, 1.0 - static_cast<double>(s) / t_max), power);
      });
    }, "T_max, power (1)");
    r.add("MultiStepMultiGammaLR", [](YamlReader& y) -> std::unique_ptr<LrScheduler> {
      auto m = milestones(y);
      auto gammas = y.get<std::vector<double>>("gammas");
      if (gammas.size() != m.size())
        throw InputError(y.where("gammas") + ": " + y.path() + " needs one gamma per milestone");
      return std::make_unique<FnScheduler>([=](double b, int64_t s) {
        for (size_t i = 0; i < m.size() && m[i] <= s; ++i) b *= gammas[i];
        return b;
      });
    }, "milestones, gammas");
    r.freeze();
  });
}

}  // namespace igb::compress
