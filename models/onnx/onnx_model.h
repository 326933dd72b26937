#pragma once

#include <string>
#include <vector>

#include "models/import/import_hook.h"
#include "models/model.h"

namespace igb::models {

/// The model name of an ONNX file: "onnx:PATH" (docs/onnx-import.md).
inline constexpr const char* kOnnxPrefix = "onnx:";

/// The registry entry "onnx", whose factory builds a model from an ONNX file
/// (models/onnx/onnx_body.h): the model args "file" (what follows "onnx:" in the name),
/// "crc32c" (checked when given: a checkpoint records it), "family" (auto, a family of `hooks`, or
/// model, as for TorchScript files), "input_size" and "channels" (0, the default: the file's own
/// input dimensions; a symbolic dimension needs them), and each hook's own arg. The graph must take
/// one float [N, C, H, W] input and give one output.
void register_onnx_model(Registry<ModelSpec>& registry, std::vector<ImportHook> hooks);

}  // namespace igb::models
