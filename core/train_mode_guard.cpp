#include "core/train_mode_guard.h"

namespace igb {

TrainModeGuard::TrainModeGuard(torch::nn::Module& module, bool train)
    : module_(module), was_training_(module.is_training()) {
  module_.train(train);
}

TrainModeGuard::~TrainModeGuard() { module_.train(was_training_); }

}  // namespace igb
