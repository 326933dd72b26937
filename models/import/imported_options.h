#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/import/import_hook.h"
#include "models/model.h"

namespace igb::models {

/// "torchscript" for a model named "torchscript:PATH", "onnx" for "onnx:PATH" (the registry
/// entries that import them), "" for any other name.
std::string imported_kind(const std::string& name);

/// Whether `name` names a model brought as a file (torchscript:PATH, onnx:PATH).
inline bool is_imported_model(const std::string& name) { return !imported_kind(name).empty(); }

/// The model args of a model brought as a file (torchscript:PATH, onnx:PATH), resolved.
struct ImportedOptions {
  /// The file's absolute path.
  std::string file;
  /// The file's CRC-32C ("" until read); a checkpoint records it.
  std::string crc32c;
  /// auto, a hook's family, or model.
  std::string family = "auto";
  /// Side of the square input and its channels (0: the file says, ONNX only).
  int64_t input_size = 32;
  int64_t channels = 3;
  /// The value of each family hook's own arg (ImportHook::arg), 0 until given or resolved; by
  /// the hooks' order.
  std::vector<int64_t> hook_args;
  /// What each family hook's take_args took (ImportHook::take_args), by the hooks' order.
  std::vector<nlohmann::json> hook_extras;

  nlohmann::json to_json(const std::vector<ImportHook>& hooks) const;
};

/// Reads the model args of `kind` ("torchscript", "onnx") from `json`, with `defaults` for the
/// ones not given; unknown args, out-of-range values and an unknown family are InputErrors. The
/// file becomes an absolute path.
ImportedOptions read_imported_options(const std::string& kind, const nlohmann::json& json,
                                      const std::vector<ImportHook>& hooks,
                                      const ImportedOptions& defaults);

/// Sets `o.crc32c` to the file's CRC-32C; an InputError when the args recorded another one (the
/// file changed since a checkpoint was saved with it).
void check_file_crc(ImportedOptions& o);

/// The index of family `name`'s hook; hooks.size() for none ("auto", "model").
size_t hook_index(const std::vector<ImportHook>& hooks, const std::string& name);

/// Fixes the family (auto: the first hook that recognises `out`, the file's output on zeros of
/// `input`, else model) and lets its hook check the output and resolve its arg.
void resolve_family(ImportedOptions& o, const std::vector<ImportHook>& hooks, const at::Tensor& out,
                    const std::vector<int64_t>& input);

/// The model: `body` wrapped by the family's hook (with the family's further args applied), or a
/// plain model of input `input` the tools take (family model). Another family's further args are
/// an InputError naming the arg and both families.
Model wrap_imported(const ImportedOptions& o, const std::vector<ImportHook>& hooks,
                    std::shared_ptr<ImportedBody> body, const std::vector<int64_t>& input);

}  // namespace igb::models
