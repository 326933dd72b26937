#pragma once

#include <torch/nn/module.h>

#include <utility>
#include <vector>

namespace igb {

/// Puts `module` in training (`train` true) or evaluation mode and puts it back in the mode it was
/// in (that of the root module) when the guard goes out of scope, also when an exception leaves
/// the scope.
///
///   TrainModeGuard eval(model, /*train=*/false);
///   auto out = model.forward(x);  // BatchNorm uses running statistics, dropout is off
class TrainModeGuard {
 public:
  TrainModeGuard(torch::nn::Module& module, bool train);
  ~TrainModeGuard();
  TrainModeGuard(const TrainModeGuard&) = delete;
  TrainModeGuard& operator=(const TrainModeGuard&) = delete;

  /// The mode restored at the end.
  bool was_training() const { return was_training_; }

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

/// Turns `requires_grad` off for every parameter of `module` and gives each parameter its own flag
/// back when the guard goes out of scope, also when an exception leaves the scope. Operations
/// recorded meanwhile treat the parameters as constants: a backward pass through them computes
/// gradients for their inputs only, and leaves the parameters' `grad` as it was.
///
///   {
///     FrozenParameters frozen(critic);
///     score = critic.forward(restored);  // backward reaches `restored`, not the critic
///   }
class FrozenParameters {
 public:
  explicit FrozenParameters(torch::nn::Module& module);
  ~FrozenParameters();
  FrozenParameters(const FrozenParameters&) = delete;
  FrozenParameters& operator=(const FrozenParameters&) = delete;

 private:
  std::vector<std::pair<at::Tensor, bool>> saved_;
};

}  // namespace igb
