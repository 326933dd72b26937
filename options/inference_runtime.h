#pragma once

// --runtime: how the commands that run a trained model for inference (igb-test, igb-tools run,
// profile, partition, early-exit, igb-serve) execute it.

#include <memory>
#include <string>

#include "models/evaluation.h"
#include "models/model.h"

namespace CLI {
class App;
}  // namespace CLI

namespace igb::options {

/// The runtimes --runtime takes: "inference" (the model's inference form,
/// runtime/inference_model.h) and "eager" (LibTorch's forward, as in training).
inline constexpr const char* kInferenceRuntime = "inference";
inline constexpr const char* kEagerRuntime = "eager";

/// Adds --runtime inference|eager (default inference), bound to `runtime`.
void add_runtime_option(CLI::App& app, std::string& runtime);

/// The forward pass `model` (in eval mode) runs with under `runtime`: its inference form for a
/// float32 model on the CPU, made once here and compiled per input shape on first use; its own
/// eager forward otherwise (runtime "eager", a CUDA or non-float32 model). `label`, when given,
/// receives what runs ("inference form", "eager").
models::Forward inference_forward(const models::Model& model, const std::string& name,
                                  const std::string& runtime, std::string* label = nullptr);

}  // namespace igb::options
