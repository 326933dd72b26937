#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

namespace igb::models {

/// Another implementation of a checkpoint's model that igb-test evaluates on the same data next to
/// the checkpoint's own forward (`igb-test --onnx F.onnx`: the exported model in onnxruntime).
struct ExternalForward {
  /// What runs, for the comparison table ("onnxruntime").
  std::string label;
  /// The file it runs (the .onnx model).
  std::string source;
  /// The batch in, the model's output out, on the batch's device.
  std::function<at::Tensor(const at::Tensor&)> forward;
  bool enabled() const { return static_cast<bool>(forward); }
};

}  // namespace igb::models
