#include "models/loss_scaler.h"

#include <cmath>
#include <stdexcept>

#include "core/error.h"

namespace igb::models {

LossScaler::LossScaler(LossScalerOptions options) : options_(options), scale_(options.init_scale) {}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return loss * scale_; }

void LossScaler::unscale(torch::optim::Optimizer& optimizer) {
  if (unscaled_) throw std::logic_error("LossScaler::unscale called twice in one step");
  unscaled_ = true;
  const double inverse = 1.0 / scale_;
  // The count of non-finite elements stays on the device until the end: one host copy per step.
  at::Tensor non_finite;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      auto& g = p.mutable_grad();
      if (!g.defined()) continue;
      g.mul_(inverse);
      auto n = at::logical_not(at::isfinite(g)).sum();
      non_finite = non_finite.defined() ? non_finite + n.to(non_finite.device()) : n;
    }
  found_inf_ = non_finite.defined() && non_finite.item<int64_t>() > 0;
}

bool LossScaler::step(torch::optim::Optimizer& optimizer) {
  if (!unscaled_) unscale(optimizer);
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

void LossScaler::update() {
  if (found_inf_) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
  } else if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
  unscaled_ = false;
  found_inf_ = false;
}

nlohmann::json LossScaler::state() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}};
}

void LossScaler::load_state(const nlohmann::json& state, const std::string& where) {
  if (!state.is_object() || !state.contains("scale") || !state["scale"].is_number() ||
      !state.contains("growth_tracker") || !state["growth_tracker"].is_number_integer())
    throw InputError(where +
                     ": the loss scaler's state is not {scale: number, growth_tracker: "
                     "integer}: " +
                     state.dump());
  const double s = state["scale"].get<double>();
  const int64_t n = state["growth_tracker"].get<int64_t>();
  if (!std::isfinite(s) || s <= 0 || n < 0)
    throw InputError(where +
                     ": the loss scaler's scale must be finite and > 0 and its "
                     "growth_tracker >= 0: " +
                     state.dump());
  scale_ = s;
  growth_tracker_ = n;
  unscaled_ = false;
  found_inf_ = false;
}

}  // namespace igb::models
