#pragma once

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
};

using LrSchedulerFactory = std::function<std::unique_ptr<LrScheduler>(YamlReader& yaml)>;

/// StepLR (step_size, gamma), MultiStepLR (milestones, gamma), ExponentialLR (gamma),
/// CosineAnnealingLR (T_max, eta_min), PolynomialLR (T_max, power), MultiStepMultiGammaLR
/// (milestones, gammas).
Registry<LrSchedulerFactory>& lr_scheduler_registry();
void register_builtin_lr_schedulers();

}  // namespace igb::compress
