#pragma once

#include <torch/optim/optimizer.h>

namespace igb {

/// Sets the learning rate of every parameter group of `optimizer` (SGD, Adam, AdamW, RMSprop,
/// Adagrad, LBFGS: any optimizer whose options override OptimizerOptions::set_lr).
///
///   set_lr(optimizer, 0.01);
void set_lr(torch::optim::Optimizer& optimizer, double lr);

/// The learning rate of the first parameter group (the one a schedule reports).
double get_lr(const torch::optim::Optimizer& optimizer);

}  // namespace igb
