#include "core/activation.h"

#include "core/trace_scope.h"

namespace igb {

std::string activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::kReLU:
      return "relu";
    case ActivationKind::kReLU6:
      return "relu6";
    case ActivationKind::kPReLU:
      return "prelu";
    case ActivationKind::kLeakyReLU:
      return "leaky_relu";
    case ActivationKind::kTanh:
      return "tanh";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kIdentity:
      return "identity";
  }
  return "unknown";
}

ActivationImpl::ActivationImpl(ActivationOptions options) : options_(options) {
  if (options_.kind() == ActivationKind::kPReLU)
    weight =
        register_parameter("weight", torch::full({options_.num_parameters()}, options_.init()));
}

torch::Tensor ActivationImpl::forward_original(const torch::Tensor& x) {
  switch (options_.kind()) {
    case ActivationKind::kReLU:
      return options_.inplace() ? x.relu_() : torch::relu(x);
    case ActivationKind::kReLU6:
      return options_.inplace() ? torch::hardtanh_(const_cast<torch::Tensor&>(x), 0.0, 6.0)
                                : torch::hardtanh(x, 0.0, 6.0);
    case ActivationKind::kPReLU:
      return torch::prelu(x, weight);
    case ActivationKind::kLeakyReLU:
      return options_.inplace()
                 ? torch::leaky_relu_(const_cast<torch::Tensor&>(x), options_.negative_slope())
                 : torch::leaky_relu(x, options_.negative_slope());
    case ActivationKind::kTanh:
      return torch::tanh(x);
    case ActivationKind::kSigmoid:
      return torch::sigmoid(x);
    case ActivationKind::kIdentity:
      return x;
  }
  return x;
}

torch::Tensor ActivationImpl::forward(const torch::Tensor& x) {
  TraceScope scope(this);
  torch::Tensor y = replacement_.is_empty() ? forward_original(x) : replacement_.forward(x);
  if (branch_enabled_ && !branch_.is_empty()) branch_output_ = branch_->forward(y);
  return y;
}

void ActivationImpl::attach_branch(torch::nn::Sequential net) {
  if (!branch_.is_empty()) unregister_module("branch_net");
  branch_ = register_module("branch_net", std::move(net));
}

torch::Tensor ActivationImpl::take_branch_output() {
  torch::Tensor out = branch_output_;
  branch_output_ = torch::Tensor();
  return out;
}

void ActivationImpl::replace(torch::nn::AnyModule replacement) {
  restore();
  replacement_ = std::move(replacement);
  register_module("replacement", replacement_.ptr());
}

void ActivationImpl::restore() {
  if (replacement_.is_empty()) return;
  unregister_module("replacement");
  replacement_ = torch::nn::AnyModule();
}

}  // namespace igb
