#include "core/train_mode_guard.h"

namespace igb {

TrainModeGuard::TrainModeGuard(torch::nn::Module& module, bool train)
    : module_(module), was_training_(module.is_training()) {
  module_.train(train);
}

TrainModeGuard::~TrainModeGuard() { module_.train(was_training_); }

FrozenParameters::FrozenParameters(torch::nn::Module& module) {
  for (auto& p : module.parameters()) {
    saved_.emplace_back(p, p.requires_grad());
    p.set_requires_grad(false);
  }
}

FrozenParameters::~FrozenParameters() {
  for (auto& [p, flag] : saved_) p.set_requires_grad(flag);
}

}  // namespace igb
