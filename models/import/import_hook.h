#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace igb::models {

/// Where a tensor of an imported file went in the model.
struct SourceName {
  /// The tensor's name in the file ("conv1.weight", "onnx::Conv_193").
  std::string file_name;
  /// Its name among the model's parameters or buffers ("" for a tensor the model's code reads
  /// as a constant, or none reads).
  std::string model_name;
  /// "parameter", "buffer", "constant" or "unused".
  std::string kind;
};

/// The code of an imported model as a file brought it (a TorchScript module:
/// models/torchscript/; an ONNX graph: models/onnx/), which Imported<Base> (imported.h) runs.
class ImportedBody {
 public:
  virtual ~ImportedBody() = default;
  /// Registers the model's modules, parameters and buffers in `owner`; called once, by the
  /// model's constructor.
  virtual void build(torch::nn::Module& owner) = 0;
  /// The model's output for a batch `x`.
  virtual at::Tensor forward(torch::nn::Module& owner, const at::Tensor& x) = 0;
  /// Where each tensor of the file went, in the file's order (after build()).
  virtual std::vector<SourceName> source_names() const = 0;
};

/// A model brought as a file (every Imported<Base>): the file and where its tensors went, for
/// `igb-tools summary`.
class ImportedFrom {
 public:
  virtual ~ImportedFrom() = default;
  /// The file's absolute path.
  virtual const std::string& source_file() const = 0;
  virtual std::vector<SourceName> source_names() const = 0;
};

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

/// How a family recognises and wraps a model brought as a file (torchscript:PATH,
/// models/torchscript/imported_model.h; onnx:PATH, models/onnx/onnx_model.h), so that the
/// importers name no family. A family that
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
///   h.wrap = [](std::shared_ptr<ImportedBody> body, const ImportedArgs& a) -> Model {
///     return std::make_shared<ImportedSr>(std::move(body), a, a.value, a.channels);
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
  /// The file's code as a model of the family's model base class: an Imported<Base>
  /// (models/import/imported.h).
  std::function<Model(std::shared_ptr<ImportedBody> body, const ImportedArgs& args)> wrap;
  /// The family's further model args (classify: "exits" and "exit_pool", early exits at the
  /// file's activations), taken out of `args` before the importer reads its own; an empty object
  /// when none is given. Null: the family has none.
  std::function<nlohmann::json(nlohmann::json& args)> take_args;
  /// Applies what take_args took to the model `wrap` made (classify: attaches the exits' heads).
  std::function<void(const Model& model, const nlohmann::json& taken)> apply_args;
};

}  // namespace igb::models
