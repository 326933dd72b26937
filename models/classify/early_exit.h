#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

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

/// Checks Distiller's early-exit options against a model with `exits` early exits (the final
/// exit not counted): `--earlyexit_lossweights` gives one weight per early exit, each ≥ 0, with
/// Σ w < 1 (the final exit gets 1 − Σ w); `--earlyexit_thresholds`, when given, one per early
/// exit. InputError in one line naming the option otherwise, or when a model without exits is
/// given either.
void check_earlyexit_options(const std::string& model, size_t exits,
                             const std::vector<double>& lossweights,
                             const std::vector<double>& thresholds);

/// Distiller's training loss of an early-exit network (image_classifier.py, earlyexit_loss):
/// Σ_i w_i · CE(exit_i, target) + (1 − Σ w) · CE(final, target), the mean cross-entropy of each.
/// `outputs` as forward_exits returns them (early exits, then the final output), in float32.
at::Tensor earlyexit_loss(const std::vector<at::Tensor>& outputs, const at::Tensor& target,
                          const std::vector<double>& lossweights);

/// Distiller's validation statistics of an early-exit network (image_classifier.py,
/// earlyexit_validate_loss and earlyexit_validate_stats): a sample leaves at the first early exit
/// whose cross-entropy *against its true label* is below that exit's threshold, else at the final
/// exit; each exit's top-1 and top-5 count the samples that left there, and the network's are
/// their average weighted by the share leaving at each. This rule needs the label, so it is a
/// training-time diagnostic; deployed decisions are deploy/early_exit's. Also kept per exit (not
/// in Distiller): its top-1 over every sample.
class DistillerExitStats {
 public:
  /// `thresholds` one per early exit; empty: every sample leaves at the final exit.
  DistillerExitStats(size_t early_exits, std::vector<double> thresholds);

  /// One batch: `outputs` as forward_exits returns them, `target` the labels.
  void add(const std::vector<at::Tensor>& outputs, const at::Tensor& target);

  struct Exit {
    /// Samples that left here.
    int64_t taken = 0;
    /// Top-1 / top-5 (%) of the samples that left here (0 when none did, as Distiller).
    double top1 = 0, top5 = 0;
    /// Mean over batches of the batch's mean cross-entropy at this exit (Distiller's
    /// losses_exits).
    double loss = 0;
    /// Top-1 (%) of this exit over every sample.
    double top1_all = 0;
  };
  /// Early exits, then the final one.
  std::vector<Exit> exits() const;
  int64_t samples() const { return samples_; }
  /// The network's top-1 and top-5 (%): Σ exit top-k · taken / samples.
  double top1() const;
  double top5() const;

  /// Distiller's log lines ("Exit 0: 712", "Percent Early Exit 0: 71.200", "Accuracy Stats for
  /// exit 0: top1 = …, top5 = …", "Totals for entire network with early exits: …").
  std::vector<std::string> report() const;

 private:
  std::vector<double> thresholds_;
  std::vector<int64_t> taken_, hit1_, hit5_, hit1_all_, batches_;
  std::vector<double> loss_sum_;
  int64_t samples_ = 0;
};

/// The generic head of an exit on a C-channel feature map: AdaptiveAvgPool2d(pool) → Flatten →
/// Linear(C · pool², classes).
torch::nn::Sequential pooled_linear_head(int64_t channels, int64_t pool, int64_t classes);

/// Removes the model args that attach exits to any classifier from `options` and returns them:
/// "exits", activation names separated by commas ("layer1.2.relu2,layer2.2.relu2"), and
/// "exit_pool", the side of each head's pooling (1 … 16, default 2). Empty when neither is given.
nlohmann::json take_exit_args(nlohmann::json& options);

/// Attaches pooled_linear_head exits at the activations `args` names (take_exit_args), each sized
/// by the channels its activation gives for the model's input; InputError naming an exit that is
/// not an activation or whose output is not a feature map [N, C, H, W].
void attach_exit_args(torch::nn::Module& model, const nlohmann::json& args,
                      const std::vector<int64_t>& input_shape, int64_t classes);

/// Distiller's exit of `resnet<N>_cifar_earlyexit` (models/cifar10/resnet_cifar_earlyexit.py):
/// after layer1.2.relu2, AvgPool2d(3) → Flatten → Linear(16 · ⌊s/3⌋², classes) for an s × s input
/// (1600 inputs at 32 × 32).
std::vector<ExitSpec> distiller_resnet_cifar_exits(int64_t classes, int64_t input_size);

/// Distiller's two exits of `resnet50_earlyexit` (models/imagenet/resnet_earlyexit.py), for an
/// s × s input: after layer1.2.relu3, Conv2d(256, 10, 7, stride 2, padding 3) → MaxPool2d(3, 2,
/// 1) → Flatten → Linear(10 · a², classes); after layer2.3.relu3, Conv2d(512, 12, 7, 2, 3) →
/// MaxPool2d(3, 2, 1) → Flatten → Linear(12 · b², classes); a = 14 and b = 7 at 224 (Distiller's
/// 1960 and 588).
std::vector<ExitSpec> distiller_resnet50_exits(int64_t classes, int64_t input_size);

}  // namespace igb::models::classify
