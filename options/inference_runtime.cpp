#include "options/inference_runtime.h"

#include <CLI/CLI.hpp>

#include "runtime/inference_model.h"

namespace igb::options {

void add_runtime_option(CLI::App& app, std::string& runtime) {
  app.add_option("--runtime", runtime,
                 "How the model runs: inference (its inference form: BatchNorm folded, "
                 "activations fused, oneDNN kernels with pre-packed weights; docs/runtime.md) or "
                 "eager (LibTorch's forward, as in training)")
      ->capture_default_str()
      ->check(CLI::IsMember({kInferenceRuntime, kEagerRuntime}));
}

models::Forward inference_forward(const models::Model& model, const std::string& name,
                                  const std::string& runtime, std::string* label) {
  bool float_cpu = true;
  for (const auto& p : model->parameters())
    float_cpu = float_cpu && p.device().is_cpu() && p.scalar_type() == at::kFloat;
  if (runtime != kInferenceRuntime || !float_cpu) {
    if (label) *label = "eager";
    return [model](const at::Tensor& x) { return model->forward(x); };
  }
  if (label) *label = "inference form";
  auto form = runtime::InferenceModel::make(
      model, [model](const at::Tensor& x) { return model->forward(x); }, name);
  return [form](const at::Tensor& x) { return form->forward(x); };
}

}  // namespace igb::options
