#include "models/classify/early_exit.h"

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include "core/error.h"

namespace igb::models::classify {

void attach_exits(torch::nn::Module& model, const std::vector<ExitSpec>& exits) {
  std::vector<std::string> activations;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (std::dynamic_pointer_cast<ActivationImpl>(item.value())) activations.push_back(item.key());
  for (const auto& e : exits) {
    std::shared_ptr<ActivationImpl> act;
    for (const auto& item : model.named_modules("", false))
      if (item.key() == e.point) act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
    if (!act)
      throw InputError("cannot attach an exit at '" + e.point +
                       "': exits branch from an activation module; closest: " +
                       join(closest_names(e.point, activations)));
    if (e.head.is_empty()) throw InputError("the exit at '" + e.point + "' has no head");
    act->attach_branch(e.head);
  }
}

std::vector<std::pair<std::string, Activation>> exit_points(torch::nn::Module& model) {
  std::vector<std::pair<std::string, Activation>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false))
    if (auto act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
        act && act->has_branch())
      out.emplace_back(item.key(), Activation(act));
  return out;
}

std::vector<at::Tensor> forward_exits(torch::nn::Module& model,
                                      const std::function<at::Tensor(const at::Tensor&)>& forward,
                                      const at::Tensor& x) {
  auto points = exit_points(model);
  struct Enable {
    std::vector<std::pair<std::string, Activation>>& p;
    explicit Enable(std::vector<std::pair<std::string, Activation>>& points) : p(points) {
      for (auto& [name, act] : p) {
        act->take_branch_output();
        act->set_branch_enabled(true);
      }
    }
    ~Enable() {
      for (auto& [name, act] : p) act->set_branch_enabled(false);
    }
  } enable(points);
  const at::Tensor final_output = forward(x);
  std::vector<at::Tensor> out;
  for (auto& [name, act] : points) {
    at::Tensor y = act->take_branch_output();
    if (!y.defined()) throw InputError("the forward pass did not reach the exit at '" + name + "'");
    out.push_back(y);
  }
  out.push_back(final_output);
  return out;
}

std::vector<ExitSpec> distiller_resnet_cifar_exits(int64_t classes, int64_t input_size) {
  const int64_t side = input_size / 3;
  if (side < 1)
    throw InputError("Distiller's ResNet-CIFAR exit needs an input of at least 3 pixels");
  torch::nn::Sequential head(torch::nn::AvgPool2d(torch::nn::AvgPool2dOptions(3)),
                             torch::nn::Flatten(), torch::nn::Linear(16 * side * side, classes));
  return {{"layer1.2.relu2", head}};
}

}  // namespace igb::models::classify
