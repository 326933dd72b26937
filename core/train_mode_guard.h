#pragma once

#include <torch/nn/module.h>

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

}  // namespace igb
