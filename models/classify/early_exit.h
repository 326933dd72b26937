#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/activation.h"

namespace igb::models::classify {

/// One early exit: the activation module it branches from and the head that classifies there.
struct ExitSpec {
  /// Dotted module name of an Activation ("layer1.2.relu2").
  std::string point;
  torch::nn::Sequential head{nullptr};
};

/// Attaches `exits` to `model` (docs/early-exit.md): each head becomes the child "branch_net" of
/// its activation, so its parameters are named as in Distiller
/// (`layer1.2.relu2.branch_net.2.weight`) and schedules, checkpoints and optimizers see them as any
/// layer. An exit point that is not an Activation module of the model is an InputError naming the
/// closest activations.
void attach_exits(torch::nn::Module& model, const std::vector<ExitSpec>& exits);

/// The model's exit points in forward order (registration order), each with its activation.
std::vector<std::pair<std::string, Activation>> exit_points(torch::nn::Module& model);

/// Runs `forward(x)` with every exit's head enabled: the exits' logits in forward order, then the
/// final output. An exit the forward did not reach is an InputError.
std::vector<at::Tensor> forward_exits(torch::nn::Module& model,
                                      const std::function<at::Tensor(const at::Tensor&)>& forward,
                                      const at::Tensor& x);

/// Distiller's exit of `resnet<N>_cifar_earlyexit` (models/cifar10/resnet_cifar_earlyexit.py):
/// after layer1.2.relu2, AvgPool2d(3) → Flatten → Linear(16 · ⌊s/3⌋², classes) for an s × s input
/// (1600 inputs at 32 × 32).
std::vector<ExitSpec> distiller_resnet_cifar_exits(int64_t classes, int64_t input_size);

}  // namespace igb::models::classify
