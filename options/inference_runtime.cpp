#include "options/inference_runtime.h"

#include <CLI/CLI.hpp>

#include "core/error.h"
#include "runtime/inference_model.h"

namespace igb::options {

CLI::Option* add_runtime_option(CLI::App& app, std::string& runtime,
                                const std::vector<std::string>& allowed, const std::string& help) {
  return app.add_option("--runtime", runtime, help)
      ->capture_default_str()
      ->check(CLI::IsMember(allowed));
}

void add_runtime_option(CLI::App& app, std::string& runtime) {
  add_runtime_option(app, runtime, {kInferenceRuntime, kInt8Runtime, kEagerRuntime},
                     "How the model runs: inference (its inference form: BatchNorm folded, "
                     "activations fused, oneDNN kernels with pre-packed weights; docs/runtime.md), "
                     "int8 (the same with a quantized model's layers in integers; docs/int8.md) "
                     "or eager (LibTorch's forward, as in training)");
}

void add_int8_engine_option(CLI::App& app, std::string& engine) {
  app.add_option("--int8-engine", engine,
                 "Whose integer kernels run the layers under --runtime int8: onednn (oneDNN's, "
                 "residual adds fused), qnnpack (LibTorch's QNNPACK, the ARM engine) or auto "
                 "(both timed on the input shape, the faster kept; docs/int8.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "onednn", "qnnpack"}));
}

CLI::Option* add_int8_weights_option(CLI::App& app, std::string& choice, const std::string& what) {
  return app
      .add_option("--int8-weights", choice,
                  "Grid of the 8-bit weights " + what +
                      ": 8 (as the schedule says), 7 (integers within 63: exact on CPUs without "
                      "VNNI with no split input, at some accuracy) or auto (7 on such a CPU "
                      "when the activations are unsigned, else 8; docs/int8.md)")
      ->capture_default_str()
      ->check(CLI::IsMember({"8", "7", "auto"}));
}

int64_t int8_weight_bits(const std::string& choice, bool unsigned_activations) {
  if (choice == "7") return 7;
  if (choice == "auto") return runtime::int8_isa().pairs_saturate && unsigned_activations ? 7 : 0;
  return 0;
}

runtime::InferenceOptions runtime_options(const std::string& runtime, const std::string& engine) {
  runtime::InferenceOptions o;
  o.int8 = runtime == kInt8Runtime;
  o.int8_engine = engine == "onednn"    ? runtime::Int8Engine::kOneDnn
                  : engine == "qnnpack" ? runtime::Int8Engine::kQnnpack
                                        : runtime::Int8Engine::kAuto;
  return o;
}

namespace {

bool float_cpu(const models::Model& model) {
  bool ok = true;
  for (const auto& p : model->parameters())
    ok = ok && p.device().is_cpu() && p.scalar_type() == at::kFloat;
  return ok;
}

/// "a, b, c, 2 more" of the first four names.
std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 4; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 4) out += ", " + std::to_string(names.size() - 4) + " more";
  return out;
}

/// "19 of 20 convolution and linear layers in INT8 (float: fc)" of a plan's steps, and on a CPU
/// whose integer pairs saturate which layers run on a split input.
std::string int8_layers(const std::vector<runtime::StepInfo>& steps, int* count) {
  int layers = 0, int8 = 0;
  std::vector<std::string> float_layers, split_layers;
  for (const auto& s : steps) {
    const bool layer = s.kind.rfind("Conv", 0) == 0 || s.kind.rfind("Linear", 0) == 0;
    if (!layer) continue;
    ++layers;
    if (s.int8)
      ++int8;
    else
      float_layers.push_back(s.name);
    if (s.int8_split) split_layers.push_back(s.name);
  }
  *count = int8;
  std::string out = std::to_string(int8) + " of " + std::to_string(layers) +
                    " convolution and linear layers in INT8";
  if (!float_layers.empty()) out += " (float: " + first_names(float_layers) + ")";
  const auto& isa = runtime::int8_isa();
  if (isa.pairs_saturate && !split_layers.empty())
    out += "; " + isa.name + " without VNNI: " + std::to_string(split_layers.size()) +
           " on a split input, exact (pairs of products could pass 16 bits: " +
           first_names(split_layers) + ")";
  return out;
}

}  // namespace

models::Forward int8_forward(const models::Model& model, const models::Forward& forward,
                             const std::string& name, std::string* what,
                             const std::string& engine) {
  if (!float_cpu(model))
    throw InputError(name + ": INT8 execution runs float32 models on the CPU (--device cpu)");
  auto form =
      runtime::InferenceModel::make(model, forward, name, runtime_options(kInt8Runtime, engine));
  auto shape = model->input_shape();
  shape[0] = 1;
  int count = 0;
  const std::string layers = int8_layers(form->steps(shape), &count);
  if (count == 0)
    throw InputError(name +
                     ": no layer runs in integers: INT8 execution needs a model trained with a "
                     "quantizer (8 bits or fewer) or post-training quantized (--quantize-eval), "
                     "a fake quantization before each layer it runs in integers");
  if (what) *what = layers + "; " + form->int8_engine(shape);
  return [form](const at::Tensor& x) { return form->forward(x); };
}

models::Forward inference_forward(const models::Model& model, const std::string& name,
                                  const std::string& runtime, std::string* label,
                                  const std::string& engine) {
  const models::Forward eager = [model](const at::Tensor& x) { return model->forward(x); };
  if (runtime == kInt8Runtime) {
    std::string what;
    auto forward = int8_forward(model, eager, name, &what, engine);
    if (label) *label = "INT8 inference form: " + what;
    return forward;
  }
  if (runtime != kInferenceRuntime || !float_cpu(model)) {
    if (label) *label = "eager";
    return eager;
  }
  if (label) *label = "inference form";
  auto form = runtime::InferenceModel::make(
      model, [model](const at::Tensor& x) { return model->forward(x); }, name);
  return [form](const at::Tensor& x) { return form->forward(x); };
}

}  // namespace igb::options
