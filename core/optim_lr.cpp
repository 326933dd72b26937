#include "core/optim_lr.h"

#include <c10/util/Exception.h>

namespace igb {

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

double get_lr(const torch::optim::Optimizer& optimizer) {
  TORCH_CHECK(!optimizer.param_groups().empty(), "get_lr: the optimizer has no parameter groups");
  return optimizer.param_groups().front().options().get_lr();
}

}  // namespace igb
