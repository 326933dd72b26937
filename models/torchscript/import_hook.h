#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace igb::models {

/// What the importer hands a family's ImportHook::wrap: the model args it resolved.
struct ImportedArgs {
  /// The file's absolute path, which names the model in messages.
  std::string file;
  /// Every model arg, resolved: what the model's options_json() returns.
  nlohmann::json options;
  /// Input channels (model arg "channels").
  int64_t channels = 3;
  /// Side of the square input (model arg "input_size", or the hook's own input_size).
  int64_t input_size = 32;
  /// The value of the hook's own model arg, resolved from the output (num_classes, scale).
  int64_t value = 0;
};

/// How a family recognises and wraps a model brought as a TorchScript file (torchscript:PATH,
/// models/torchscript/imported_model.h), so that the importer names no family. A family that
/// trains imported models gives one in its descriptor (Family::import_hook), made by its own
/// folder (models/sr/sr_import.h):
///
///   ImportHook h;
///   h.family = "sr";
///   h.arg = "scale";
///   h.arg_max = 16;
///   h.input_size = 32;
///   h.recognises = [](const at::Tensor& out, const std::vector<int64_t>& in) { ... };
///   h.resolve = [](const at::Tensor& out, const std::vector<int64_t>& in, int64_t given,
///                  const std::string& file) { ...; return scale; };
///   h.wrap = [](const torch::jit::Module& m, const ImportedArgs& a) -> Model {
///     return std::make_shared<ImportedSr>(m, a, a.value, a.channels);
///   };
struct ImportHook {
  /// The family's name: the value of the model arg "family" that picks this hook, and what the
  /// model's options record.
  std::string family;
  /// The family's own model arg ("num_classes", "scale"): 0 (the default) reads it from the
  /// output; given, it is checked against the output. Keys are unique across the hooks.
  std::string arg;
  /// The largest value `arg` may be given (the smallest is 0).
  int64_t arg_max = 0;
  /// Side of the square input the family's models take when "family" names it, whatever
  /// "input_size" says (32: the patches SR models take); 0 for "input_size".
  int64_t input_size = 0;
  /// Whether `out`, the file's forward on zeros of shape `input` ([1, C, S, S]), is the output of
  /// one of the family's models ("family" auto).
  std::function<bool(const at::Tensor& out, const std::vector<int64_t>& input)> recognises;
  /// The value of `arg` that `out` (on zeros of `input`) says, checked against `given` (0: not
  /// given). An InputError naming `file` when `out` is not a family model's output or disagrees.
  std::function<int64_t(const at::Tensor& out, const std::vector<int64_t>& input, int64_t given,
                        const std::string& file)>
      resolve;
  /// The mirrored module as a model of the family's model base class: an Imported<Base>
  /// (models/torchscript/imported.h).
  std::function<Model(const torch::jit::Module& module, const ImportedArgs& args)> wrap;
};

}  // namespace igb::models
