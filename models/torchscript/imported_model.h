#pragma once

#include <string>

#include "models/model.h"

namespace igb::models {

/// The model name of a TorchScript file: "torchscript:PATH" (docs/byo-model.md).
inline constexpr const char* kTorchScriptPrefix = "torchscript:";

/// True for "torchscript:PATH" names.
bool is_torchscript_model(const std::string& name);

/// The registry entry "torchscript", whose factory builds a model from a TorchScript file: the
/// model args "file" (what follows "torchscript:" in the name), "crc32c" (checked when given: a
/// checkpoint records it), "family" (auto, classify, sr or model: auto reads it from the output
/// of a forward on zeros, [N, K] for a classifier, [N, C, s·h, s·w] for super-resolution),
/// "input_size" and "channels" (the input, default 32 and 3), "num_classes" and "scale" (checked
/// against the output when given). The model's forward is checked against the file's on a random
/// input before it is returned.
void register_torchscript_model(Registry<ModelSpec>& registry);

}  // namespace igb::models
