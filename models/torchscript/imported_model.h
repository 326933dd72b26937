#pragma once

#include <string>
#include <vector>

#include "models/import/import_hook.h"
#include "models/model.h"

namespace igb::models {

/// The registry entry "torchscript", whose factory builds a model from a TorchScript file: the
/// model args "file" (what follows "torchscript:" in the name), "crc32c" (checked when given: a
/// checkpoint records it), "family" (auto, a family of `hooks`, or model: auto takes the first
/// hook that recognises the output of a forward on zeros, else model, a plain model the tools
/// take), "input_size" and "channels" (the input, default 32 and 3), and each hook's own arg
/// (ImportHook::arg: num_classes, scale), which its hook checks against the output when given.
/// The family's hook wraps the model into the family's model class. The model's forward is
/// checked against the file's on a random input before it is returned.
void register_torchscript_model(Registry<ModelSpec>& registry, std::vector<ImportHook> hooks);

}  // namespace igb::models
