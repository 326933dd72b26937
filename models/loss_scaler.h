#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace igb::models {

/// Settings of a LossScaler; the defaults are those of mixed-precision training on CUDA.
struct LossScalerOptions {
  /// The first scale, 2^16.
  double init_scale = 65536.0;
  /// The scale is multiplied by this after `growth_interval` consecutive clean steps.
  double growth_factor = 2.0;
  /// The scale is multiplied by this after a step whose gradients hold inf or NaN.
  double backoff_factor = 0.5;
  /// Consecutive clean steps before the scale grows.
  int64_t growth_interval = 2000;
};

/// Dynamic loss scaling for float16 training: the loss is multiplied by the scale before backward
/// so small gradients survive float16, the gradients are divided by it before anything reads them,
/// and a step whose gradients hold inf or NaN is skipped and halves the scale. Use per minibatch:
///
///   scaler.scale(loss).backward();
///   scaler.unscale(optimizer);      // gradients are true gradients from here on
///   ... clipping, masks ...
///   scaler.step(optimizer);         // skipped when a gradient was not finite
///   scaler.update();
class LossScaler {
 public:
  explicit LossScaler(LossScalerOptions options = {});

  /// `loss` times the current scale.
  at::Tensor scale(const at::Tensor& loss) const;
  /// Divides every defined gradient of `optimizer` by the scale and records whether any element
  /// is inf or NaN. At most once per step (a second call before update() is a logic_error).
  void unscale(torch::optim::Optimizer& optimizer);
  /// Steps `optimizer` unless unscale() found a non-finite gradient (unscales first when it was not
  /// called yet); returns whether it stepped.
  bool step(torch::optim::Optimizer& optimizer);
  /// Ends the step: backs the scale off after a non-finite gradient and resets the count of clean
  /// steps; otherwise counts the step and grows the scale every `growth_interval` clean steps.
  void update();

  double scale_value() const { return scale_; }
  /// Consecutive clean steps since the scale last changed.
  int64_t growth_tracker() const { return growth_tracker_; }
  /// Whether the last unscale() found inf or NaN.
  bool found_inf() const { return found_inf_; }

  /// {"scale": S, "growth_tracker": N}, kept in a checkpoint's training state.
  nlohmann::json state() const;
  /// Restores state(); InputError naming `where` when the record is not of that shape.
  void load_state(const nlohmann::json& state, const std::string& where);

 private:
  LossScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
  bool unscaled_ = false;
  bool found_inf_ = false;
};

}  // namespace igb::models
