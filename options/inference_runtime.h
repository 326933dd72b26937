#pragma once

// --runtime: how the commands that run a trained model for inference (igb-test, igb-tools run,
// profile, partition, early-exit, igb-serve) execute it.

#include <memory>
#include <string>
#include <vector>

#include "models/evaluation.h"
#include "models/model.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace igb::runtime {
struct InferenceOptions;
}  // namespace igb::runtime

namespace igb::options {

/// The runtimes --runtime takes: "inference" (the model's inference form,
/// runtime/inference_model.h), "int8" (the same with its quantized layers in integers,
/// InferenceOptions::int8) and "eager" (LibTorch's forward, as in training).
inline constexpr const char* kInferenceRuntime = "inference";
inline constexpr const char* kInt8Runtime = "int8";
inline constexpr const char* kEagerRuntime = "eager";

/// Adds --runtime bound to `runtime` (its value is the default shown), taking one of `allowed`
/// (kInferenceRuntime, kInt8Runtime, kEagerRuntime) and described by `help`: what each command
/// that runs a model, measures its costs or serves it says of its own runtimes.
CLI::Option* add_runtime_option(CLI::App& app, std::string& runtime,
                                const std::vector<std::string>& allowed, const std::string& help);
/// Adds --runtime inference|int8|eager (default inference), bound to `runtime`.
void add_runtime_option(CLI::App& app, std::string& runtime);

/// Adds --int8-engine auto|onednn|qnnpack (default auto): whose kernels run the integer layers
/// under --runtime int8 (runtime::Int8Engine), bound to `engine`.
void add_int8_engine_option(CLI::App& app, std::string& engine);

/// Adds --int8-weights 8|7|auto (default 8), bound to `choice`: the grid of the 8-bit weights a
/// quantization writes; 7 keeps every integer layer exact without VNNI on its input as it is (no
/// split, docs/int8.md). Returns the option (for needs()).
CLI::Option* add_int8_weights_option(CLI::App& app, std::string& choice, const std::string& what);

/// The weight bits `choice` (--int8-weights) asks for: 7, or 0 (the schedule's own bits); "auto"
/// is 7 on a CPU whose integer pairs saturate (runtime::int8_isa(): no VNNI) when the activations
/// are unsigned (up to 255, so 8-bit weights could pass 16 bits in a pair), else 0.
int64_t int8_weight_bits(const std::string& choice, bool unsigned_activations);

/// The inference form of `runtime` ("inference", "int8") with the integer layers on `engine`
/// ("auto", "onednn", "qnnpack").
runtime::InferenceOptions runtime_options(const std::string& runtime,
                                          const std::string& engine = "auto");

/// `model`'s inference form with its quantized layers in integers, tracing `forward` (its
/// fake-quantized forward pass); `what` receives "19 of 20 convolution and linear layers in
/// INT8 (float: fc); oneDNN, timed faster (oneDNN 0.190 ms, QNNPACK 1.210 ms)". InputError naming
/// `name` when the model is not a float32 CPU model or no layer runs in integers (no fake
/// quantization before a layer with integer weights).
models::Forward int8_forward(const models::Model& model, const models::Forward& forward,
                             const std::string& name, std::string* what = nullptr,
                             const std::string& engine = "auto");

/// The forward pass `model` (in eval mode) runs with under `runtime`: its inference form for a
/// float32 model on the CPU (with "int8", int8_forward's), made once here and compiled per input
/// shape on first use; its own eager forward otherwise (runtime "eager", a CUDA or non-float32
/// model). `label`, when given, receives what runs ("inference form", "INT8 inference form: 19
/// of 20 ...", "eager"). `engine` as in runtime_options.
models::Forward inference_forward(const models::Model& model, const std::string& name,
                                  const std::string& runtime, std::string* label = nullptr,
                                  const std::string& engine = "auto");

}  // namespace igb::options
