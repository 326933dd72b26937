#pragma once

#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/registry.h"

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// What an LR scheduler is told when its policy steps it at the end of an epoch.
struct LrStep {
  /// The epoch that just ended (0-based); the rate set is the one for epoch + 1.
  int64_t epoch = 0;
  /// The run's `--lr`, which the closed forms scale.
  double base_lr = 0;
  /// The optimizer's rate now (what ReduceLROnPlateau reduces).
  double current_lr = 0;
  /// The validation metric the scheduler watches (NaN for those that watch none).
  double metric = 0;
};

/// A learning-rate scheduler, stepped by its policy at the end of each epoch the policy names, as
/// Distiller steps PyTorch's schedulers (`step(epoch = current_epoch + 1)`).
class LrScheduler {
 public:
  virtual ~LrScheduler() = default;
  /// The rate for epoch `step.epoch + 1`.
  virtual double step(const LrStep& step) = 0;
  /// Whether step() needs a validation metric (ReduceLROnPlateau); see metric_mode().
  virtual bool watches_metric() const { return false; }
  /// "min" or "max": whether the watched metric improves downwards or upwards.
  virtual std::string metric_mode() const { return {}; }
  /// State that step() changes (none for the closed forms), for the checkpoint.
  virtual nlohmann::json state() const;
  virtual void load_state(const nlohmann::json& state) {}
  /// The resolved configuration as a schedule mapping ({"class": …, key: value, …}); loading it
  /// back gives the same schedule.
  virtual nlohmann::json hyperparams() const = 0;
};

/// A scheduler whose rate is a function of the epoch alone: step() sets lr(base, epoch + 1),
/// counted from epoch 0 whatever epoch its policy starts at (a StepLR with step_size 45 whose
/// policy starts at epoch 45 gives 0.1·lr from epoch 46).
class ClosedFormLrScheduler : public LrScheduler {
 public:
  /// The rate at `epoch` (0-based) for base rate `base`.
  virtual double lr(double base, int64_t epoch) const = 0;
  double step(const LrStep& step) override { return lr(step.base_lr, step.epoch + 1); }
};

// Options. Each `from_yaml` reads one schedule mapping (the caller has already accepted `class`),
// checks values with errors naming file:line, and refuses unknown keys; `to_json` writes them back.

/// StepLR: lr·gamma^(e // step_size) at epoch e.
struct StepLROptions {
  StepLROptions() = default;
  explicit StepLROptions(int64_t step_size) : step_size_(step_size) {}
  static StepLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `step_size`: epochs between decays, > 0. Required in YAML; default 1.
  TORCH_ARG(int64_t, step_size) = 1;
  /// `gamma`: factor applied at each decay. Default 0.1.
  TORCH_ARG(double, gamma) = 0.1;
};

/// MultiStepLR: lr·gamma^(number of milestones ≤ e) at epoch e.
struct MultiStepLROptions {
  MultiStepLROptions() = default;
  explicit MultiStepLROptions(std::vector<int64_t> milestones)
      : milestones_(std::move(milestones)) {}
  static MultiStepLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `milestones`: epochs from which the rate decays, increasing. Required in YAML; default
  /// empty.
  TORCH_ARG(std::vector<int64_t>, milestones);
  /// `gamma`: factor applied at each milestone. Default 0.1.
  TORCH_ARG(double, gamma) = 0.1;
};

/// ExponentialLR: lr·gamma^e at epoch e.
struct ExponentialLROptions {
  ExponentialLROptions() = default;
  explicit ExponentialLROptions(double gamma) : gamma_(gamma) {}
  static ExponentialLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `gamma`: factor applied every epoch. Required in YAML; default 1 (constant rate).
  TORCH_ARG(double, gamma) = 1.0;
};

/// CosineAnnealingLR: eta_min + (lr − eta_min)(1 + cos(πe/T_max))/2 at epoch e.
struct CosineAnnealingLROptions {
  CosineAnnealingLROptions() = default;
  explicit CosineAnnealingLROptions(double T_max) : T_max_(T_max) {}
  static CosineAnnealingLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `T_max`: epochs of half a cosine period, > 0. Required in YAML; default 1.
  TORCH_ARG(double, T_max) = 1.0;
  /// `eta_min`: the lowest rate (absolute, not a factor). Default 0.
  TORCH_ARG(double, eta_min) = 0.0;
};

/// PolynomialLR: lr·max(0, 1 − e/T_max)^power at epoch e.
struct PolynomialLROptions {
  PolynomialLROptions() = default;
  explicit PolynomialLROptions(double T_max) : T_max_(T_max) {}
  static PolynomialLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `T_max`: epochs until the rate reaches 0, > 0. Required in YAML; default 1.
  TORCH_ARG(double, T_max) = 1.0;
  /// `power`: exponent of the decay. Default 1 (linear).
  TORCH_ARG(double, power) = 1.0;
};

/// MultiStepMultiGammaLR: lr·Π gammas[i] over milestones[i] ≤ e at epoch e.
struct MultiStepMultiGammaLROptions {
  MultiStepMultiGammaLROptions() = default;
  MultiStepMultiGammaLROptions(std::vector<int64_t> milestones, std::vector<double> gammas)
      : milestones_(std::move(milestones)), gammas_(std::move(gammas)) {}
  static MultiStepMultiGammaLROptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `milestones`: epochs from which the rate changes, increasing. Required in YAML; default
  /// empty.
  TORCH_ARG(std::vector<int64_t>, milestones);
  /// `gammas`: the factor applied at each milestone, one per milestone. Required in YAML;
  /// default empty.
  TORCH_ARG(std::vector<double>, gammas);
};

/// CosineAnnealingWarmRestarts (SGDR): a cosine from lr down to eta_min over T_i epochs, then a
/// restart; the first period lasts T_0 epochs and each next one T_mult times longer. At epoch e,
/// T_cur is e minus the start of its period: eta_min + (lr − eta_min)(1 + cos(π·T_cur/T_i))/2.
struct CosineAnnealingWarmRestartsOptions {
  CosineAnnealingWarmRestartsOptions() = default;
  explicit CosineAnnealingWarmRestartsOptions(int64_t T_0) : T_0_(T_0) {}
  static CosineAnnealingWarmRestartsOptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `T_0`: epochs of the first period, > 0. Required in YAML; default 1.
  TORCH_ARG(int64_t, T_0) = 1;
  /// `T_mult`: factor by which each period is longer than the one before, ≥ 1. Default 1.
  TORCH_ARG(int64_t, T_mult) = 1;
  /// `eta_min`: the lowest rate (absolute, not a factor). Default 0.
  TORCH_ARG(double, eta_min) = 0.0;
};

/// ReduceLROnPlateau: multiplies the current rate by `factor` when the watched validation metric
/// has not improved for more than `patience` epochs, as PyTorch's scheduler of that name. Mode
/// "max" watches the optform's primary metric (PSNR, top-1); mode "min" watches the validation
/// loss, as Distiller hands {'min': loss, 'max': top-1} to it.
struct ReduceLROnPlateauOptions {
  ReduceLROnPlateauOptions() = default;
  static ReduceLROnPlateauOptions from_yaml(YamlReader& yaml);
  nlohmann::json to_json() const;

  /// `mode`: "min" (the metric improves downwards) or "max". Default "min" (PyTorch's).
  TORCH_ARG(std::string, mode) = "min";
  /// `factor`: the factor applied at each reduction, in (0, 1). Default 0.1.
  TORCH_ARG(double, factor) = 0.1;
  /// `patience`: epochs without improvement tolerated before a reduction, ≥ 0. Default 10.
  TORCH_ARG(int64_t, patience) = 10;
  /// `threshold`: the least change that counts as an improvement (see threshold_mode), ≥ 0.
  /// Default 1e-4.
  TORCH_ARG(double, threshold) = 1e-4;
  /// `threshold_mode`: "rel" (improvement beyond best·(1 ± threshold)) or "abs" (beyond
  /// best ± threshold). Default "rel".
  TORCH_ARG(std::string, threshold_mode) = "rel";
  /// `cooldown`: epochs after a reduction during which bad epochs are not counted, ≥ 0.
  /// Default 0.
  TORCH_ARG(int64_t, cooldown) = 0;
  /// `min_lr`: the rate is never reduced below this, ≥ 0. Default 0.
  TORCH_ARG(double, min_lr) = 0.0;
  /// `eps`: a reduction smaller than this is skipped, ≥ 0. Default 1e-8.
  TORCH_ARG(double, eps) = 1e-8;
  /// `verbose`: log each reduction. Default false.
  TORCH_ARG(bool, verbose) = false;
};

/// The schedulers: each takes its options; the closed forms compute lr() from the epoch alone.
class StepLR : public ClosedFormLrScheduler {
 public:
  explicit StepLR(StepLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const StepLROptions& options() const { return options_; }

 private:
  StepLROptions options_;
};

class MultiStepLR : public ClosedFormLrScheduler {
 public:
  explicit MultiStepLR(MultiStepLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const MultiStepLROptions& options() const { return options_; }

 private:
  MultiStepLROptions options_;
};

class ExponentialLR : public ClosedFormLrScheduler {
 public:
  explicit ExponentialLR(ExponentialLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const ExponentialLROptions& options() const { return options_; }

 private:
  ExponentialLROptions options_;
};

class CosineAnnealingLR : public ClosedFormLrScheduler {
 public:
  explicit CosineAnnealingLR(CosineAnnealingLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const CosineAnnealingLROptions& options() const { return options_; }

 private:
  CosineAnnealingLROptions options_;
};

class PolynomialLR : public ClosedFormLrScheduler {
 public:
  explicit PolynomialLR(PolynomialLROptions options) : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const PolynomialLROptions& options() const { return options_; }

 private:
  PolynomialLROptions options_;
};

class MultiStepMultiGammaLR : public ClosedFormLrScheduler {
 public:
  explicit MultiStepMultiGammaLR(MultiStepMultiGammaLROptions options)
      : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const MultiStepMultiGammaLROptions& options() const { return options_; }

 private:
  MultiStepMultiGammaLROptions options_;
};

class CosineAnnealingWarmRestarts : public ClosedFormLrScheduler {
 public:
  explicit CosineAnnealingWarmRestarts(CosineAnnealingWarmRestartsOptions options)
      : options_(std::move(options)) {}
  double lr(double base, int64_t epoch) const override;
  nlohmann::json hyperparams() const override;
  const CosineAnnealingWarmRestartsOptions& options() const { return options_; }

 private:
  CosineAnnealingWarmRestartsOptions options_;
};

/// Holds the best metric seen, the count of bad epochs and the cooldown; step() returns the
/// current rate, reduced when the metric has plateaued (a NaN metric is a bad epoch).
class ReduceLROnPlateau : public LrScheduler {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options) : options_(std::move(options)) {}
  double step(const LrStep& step) override;
  bool watches_metric() const override { return true; }
  std::string metric_mode() const override { return options_.mode(); }
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;
  nlohmann::json hyperparams() const override;
  const ReduceLROnPlateauOptions& options() const { return options_; }
  /// Epochs without improvement since the last improvement or reduction.
  int64_t bad_epochs() const { return bad_epochs_; }

 private:
  bool improves(double metric) const;

  ReduceLROnPlateauOptions options_;
  /// The best metric so far; none before the first step.
  std::optional<double> best_;
  int64_t bad_epochs_ = 0;
  int64_t cooldown_left_ = 0;
};

using LrSchedulerFactory = std::function<std::unique_ptr<LrScheduler>(YamlReader& yaml)>;

/// StepLR (step_size, gamma), MultiStepLR (milestones, gamma), ExponentialLR (gamma),
/// CosineAnnealingLR (T_max, eta_min), PolynomialLR (T_max, power), MultiStepMultiGammaLR
/// (milestones, gammas), CosineAnnealingWarmRestarts (T_0, T_mult, eta_min), ReduceLROnPlateau
/// (mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps, verbose).
Registry<LrSchedulerFactory>& lr_scheduler_registry();
void register_builtin_lr_schedulers();

}  // namespace igb::compress
