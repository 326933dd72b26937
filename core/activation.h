#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>

namespace igb {

/// The activation functions a model may use.
enum class ActivationKind { kReLU, kReLU6, kPReLU, kLeakyReLU, kTanh, kSigmoid, kIdentity };

/// "relu", "prelu", ...
std::string activation_name(ActivationKind kind);

/// Options of an Activation module.
struct ActivationOptions {
  /* implicit */ ActivationOptions(ActivationKind kind) : kind_(kind) {}
  /// Which function.
  TORCH_ARG(ActivationKind, kind);
  /// PReLU only: number of learned slopes (1, or the channel count). Default 1.
  TORCH_ARG(int64_t, num_parameters) = 1;
  /// PReLU only: initial slope. Default 0.25.
  TORCH_ARG(double, init) = 0.25;
  /// LeakyReLU only: slope for x < 0. Default 0.01.
  TORCH_ARG(double, negative_slope) = 0.01;
  /// ReLU, ReLU6 and LeakyReLU only: overwrite the input instead of allocating the output, as
  /// torchvision's `ReLU(inplace=True)`. Only for inputs nothing else reads afterwards (the
  /// fresh output of a conv, BN or add). Default false.
  TORCH_ARG(bool, inplace) = false;
};

/// An activation as a registered module with a slot that can really be rewired. Models call
/// activations only through this module, so a quantizer can swap in its own implementation
/// (`replace`) and forward follows, even inside a torch::nn::Sequential, whose own module list
/// would otherwise keep calling the original. A PReLU's slopes are registered as `weight`, as in
/// PyTorch, so parameter names match (`mid_part.0.1.weight`).
///
///   auto act = Activation(ActivationOptions(ActivationKind::kPReLU).num_parameters(56));
///   act->replace(torch::nn::AnyModule(MyClippedReLU()));  // forward now calls MyClippedReLU
class ActivationImpl : public torch::nn::Module {
 public:
  explicit ActivationImpl(ActivationOptions options);

  torch::Tensor forward(const torch::Tensor& x);

  /// Routes forward through `replacement` (registered as child "replacement").
  void replace(torch::nn::AnyModule replacement);
  /// Goes back to the built-in function.
  void restore();
  bool replaced() const { return !replacement_.is_empty(); }
  /// The original function, ignoring any replacement.
  torch::Tensor forward_original(const torch::Tensor& x);

  const ActivationOptions& options() const { return options_; }
  /// PReLU after thinning sliced its slopes: records the new count.
  void set_num_parameters(int64_t n) { options_.num_parameters(n); }

  /// PReLU slopes (undefined for other kinds).
  torch::Tensor weight;

  /// Attaches an early exit's head after this activation (docs/early-exit.md): registered as the
  /// child "branch_net", as Distiller's BranchPoint names it, so its parameters are
  /// `<activation>.branch_net.<i>.weight`. While branches are enabled, forward also runs the head
  /// on the activation's output and keeps the result for take_branch_output(); while disabled
  /// (the default: tracing, tools, inference of the final exit) the head costs nothing.
  void attach_branch(torch::nn::Sequential net);
  bool has_branch() const { return !branch_.is_empty(); }
  torch::nn::Sequential& branch() { return branch_; }
  void set_branch_enabled(bool on) { branch_enabled_ = on; }
  /// The head's output of the last forward run with branches enabled (undefined when none ran);
  /// taking it clears it.
  torch::Tensor take_branch_output();

 private:
  ActivationOptions options_;
  torch::nn::AnyModule replacement_;
  torch::nn::Sequential branch_{nullptr};
  bool branch_enabled_ = false;
  torch::Tensor branch_output_;
};

TORCH_MODULE(Activation);

}  // namespace igb
