#pragma once

#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/registry.h"

namespace igb::compress {

class YamlReader;

/// A learning-rate schedule in closed form: the multiplier of the base rate after `steps` steps
/// (one step per scheduled epoch end, as PyTorch's schedulers are stepped).
class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  virtual double lr(double base, int64_t steps) const = 0;
  /// The resolved configuration as a schedule mapping ({"class": …, key: value, …}); loading it
  /// back gives the same schedule.
  virtual nlohmann::json hyperparams() const = 0;
};

// Options. Each `from_yaml` reads one schedule mapping (the caller has already accepted `class`),
// checks values with errors naming file:line, and refuses unknown keys; `to_json` writes them back.

/// StepLR: lr·gamma^(k // step_size).
struct StepLROptions {
  StepLROptions() = default;
  explicit StepLROptions(int64_t step_size) : step_size_(step_size) {}
  static StepLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `step_size`: steps (scheduled epochs) between decays, > 0. Required in YAML; default 1.
  TORCH_ARG(int64_t, step_size) = 1;
  /// `gamma`: factor applied at each decay. Default 0.1.
  TORCH_ARG(double, gamma) = 0.1;
};

/// MultiStepLR: lr·gamma^(number of milestones ≤ k).
struct MultiStepLROptions {
  MultiStepLROptions() = default;
  explicit MultiStepLROptions(std::vector<int64_t> milestones)
      : milestones_(std::move(milestones)) {}
  static MultiStepLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `milestones`: steps at which the rate decays, increasing. Required in YAML; default empty.
  TORCH_ARG(std::vector<int64_t>, milestones);
  /// `gamma`: factor applied at each milestone. Default 0.1.
  TORCH_ARG(double, gamma) = 0.1;
};

/// ExponentialLR: lr·gamma^k.
struct ExponentialLROptions {
  ExponentialLROptions() = default;
  explicit ExponentialLROptions(double gamma) : gamma_(gamma) {}
  static ExponentialLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `gamma`: factor applied at every step. Required in YAML; default 1 (constant rate).
  TORCH_ARG(double, gamma) = 1.0;
};

/// CosineAnnealingLR: eta_min + (lr − eta_min)(1 + cos(πk/T_max))/2.
struct CosineAnnealingLROptions {
  CosineAnnealingLROptions() = default;
  explicit CosineAnnealingLROptions(double T_max) : T_max_(T_max) {}
  static CosineAnnealingLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `T_max`: steps of half a cosine period, > 0. Required in YAML; default 1.
  TORCH_ARG(double, T_max) = 1.0;
  /// `eta_min`: the lowest rate (absolute, not a factor). Default 0.
  TORCH_ARG(double, eta_min) = 0.0;
};

/// PolynomialLR: lr·max(0, 1 − k/T_max)^power.
struct PolynomialLROptions {
  PolynomialLROptions() = default;
  explicit PolynomialLROptions(double T_max) : T_max_(T_max) {}
  static PolynomialLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `T_max`: steps until the rate reaches 0, > 0. Required in YAML; default 1.
  TORCH_ARG(double, T_max) = 1.0;
  /// `power`: exponent of the decay. Default 1 (linear).
  TORCH_ARG(double, power) = 1.0;
};

/// MultiStepMultiGammaLR: lr·Π gammas[i] over milestones[i] ≤ k.
struct MultiStepMultiGammaLROptions {
  MultiStepMultiGammaLROptions() = default;
  MultiStepMultiGammaLROptions(std::vector<int64_t> milestones, std::vector<double> gammas)
      : milestones_(std::move(milestones)), gammas_(std::move(gammas)) {}
  static MultiStepMultiGammaLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `milestones`: steps at which the rate changes, increasing. Required in YAML; default empty.
  TORCH_ARG(std::vector<int64_t>, milestones);
  /// `gammas`: the factor applied at each milestone, one per milestone. Required in YAML;
  /// default empty.
  TORCH_ARG(std::vector<double>, gammas);
};

/// The schedulers: each takes its options and computes lr() in closed form.
class StepLR : public LrScheduler {
 public:
  explicit StepLR(StepLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const StepLROptions& options() const { return options_; }

 private:
  StepLROptions options_;
};

class MultiStepLR : public LrScheduler {
 public:
  explicit MultiStepLR(MultiStepLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const MultiStepLROptions& options() const { return options_; }

 private:
  MultiStepLROptions options_;
};

class ExponentialLR : public LrScheduler {
 public:
  explicit ExponentialLR(ExponentialLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const ExponentialLROptions& options() const { return options_; }

 private:
  ExponentialLROptions options_;
};

class CosineAnnealingLR : public LrScheduler {
 public:
  explicit CosineAnnealingLR(CosineAnnealingLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const CosineAnnealingLROptions& options() const { return options_; }

 private:
  CosineAnnealingLROptions options_;
};

class PolynomialLR : public LrScheduler {
 public:
  explicit PolynomialLR(PolynomialLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const PolynomialLROptions& options() const { return options_; }

 private:
  PolynomialLROptions options_;
};

class MultiStepMultiGammaLR : public LrScheduler {
 public:
  explicit MultiStepMultiGammaLR(MultiStepMultiGammaLROptions options)
      : options_(std::move(options)) {}
  double lr(double base, int64_t steps) const override;
  nlohmann::json hyperparams() const override;
  const MultiStepMultiGammaLROptions& options() const { return options_; }

 private:
  MultiStepMultiGammaLROptions options_;
};

using LrSchedulerFactory = std::function<std::unique_ptr<LrScheduler>(YamlReader& yaml)>;

/// StepLR (step_size, gamma), MultiStepLR (milestones, gamma), ExponentialLR (gamma),
/// CosineAnnealingLR (T_max, eta_min), PolynomialLR (T_max, power), MultiStepMultiGammaLR
/// (milestones, gammas).
Registry<LrSchedulerFactory>& lr_scheduler_registry();
void register_builtin_lr_schedulers();

}  // namespace igb::compress
