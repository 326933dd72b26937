#include "models/torchscript/imported_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/train_mode_guard.h"
#include "models/import/imported_options.h"
#include "models/torchscript/script_body.h"

namespace igb::models {

namespace {

/// A TorchScript module's code, mirrored into the model (ScriptBody).
class ScriptImportedBody final : public ImportedBody {
 public:
  ScriptImportedBody(torch::jit::Module module, std::string file)
      : module_(std::move(module)), file_(std::move(file)) {}
  void build(torch::nn::Module& owner) override { body_.build(module_, owner, file_); }
  at::Tensor forward(torch::nn::Module& owner, const at::Tensor& x) override {
    auto out = body_.run(owner, {x});
    if (!out.isTensor())
      throw InputError(file_ + ": forward returns a " + out.tagKind() +
                       "; igb models return one tensor");
    return out.toTensor();
  }
  /// A TorchScript file's parameters and buffers keep their names.
  std::vector<SourceName> source_names() const override {
    std::vector<SourceName> out;
    for (const auto& p : module_.named_parameters()) out.push_back({p.name, p.name, "parameter"});
    for (const auto& b : module_.named_buffers()) out.push_back({b.name, b.name, "buffer"});
    return out;
  }

 private:
  torch::jit::Module module_;
  std::string file_;
  ScriptBody body_;
};

/// igb models take one input: a forward with another count of arguments without defaults is
/// refused, naming them.
void check_forward_inputs(const torch::jit::Module& module, const std::string& file) {
  auto forward = module.find_method("forward");
  if (!forward) throw InputError(file + ": the module has no forward method");
  const auto& args = forward->function().getSchema().arguments();
  std::vector<std::string> required;
  for (size_t i = 1; i < args.size(); ++i)
    if (!args[i].default_value()) required.push_back(args[i].name());
  if (required.size() != 1)
    throw InputError(file + ": forward takes " + std::to_string(required.size()) + " inputs (" +
                     join(required) + "); igb gives a model one batch of images");
}

/// The file's own forward on zeros of `input`, in evaluation mode.
at::Tensor trial_forward(torch::jit::Module& module, const ImportedOptions& o,
                         const std::vector<int64_t>& input) {
  torch::NoGradGuard no_grad;
  module.eval();
  c10::IValue out;
  try {
    out = module.forward({torch::zeros(input)});
  } catch (const std::exception& e) {
    std::string shape;
    for (size_t i = 0; i < input.size(); ++i) shape += (i ? "x" : "") + std::to_string(input[i]);
    throw InputError(o.file + ": its forward fails on a " + shape +
                     " input; give the input with --model-arg input_size=N --model-arg "
                     "channels=C" +
                     library_error_detail(e));
  }
  if (!out.isTensor())
    throw InputError(o.file + ": forward returns a " + out.tagKind() +
                     "; igb models return one tensor");
  return out.toTensor();
}

/// The rebuilt model must compute what the file computes: compared on a seeded random input.
void check_rebuilt(ModelImpl& model, torch::jit::Module& module, const ImportedOptions& o) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(20261128);
  const auto x = at::randn(model.input_shape(), gen);
  torch::NoGradGuard no_grad;
  TrainModeGuard eval(model, false);
  module.eval();
  const auto want = module.forward({x}).toTensor();
  const auto got = model.forward(x);
  const double scale = 1.0 + want.abs().max().item<double>();
  const double diff =
      got.sizes() == want.sizes() ? (got - want).abs().max().item<double>() / scale : 1e30;
  if (!(diff <= 1e-4))
    throw InputError(o.file +
                     ": the rebuilt model does not compute what the file computes "
                     "(relative difference " +
                     std::to_string(diff) + ")");
}

Model import_model(const nlohmann::json& json, const std::vector<ImportHook>& hooks) {
  ImportedOptions o = read_imported_options("torchscript", json, hooks, ImportedOptions());
  auto module = load_torchscript(o.file);
  check_file_crc(o);
  check_forward_inputs(module, o.file);
  // A family named up front may fix the input (SR models take 32x32 patches).
  const size_t named = hook_index(hooks, o.family);
  if (named < hooks.size() && hooks[named].input_size != 0) o.input_size = hooks[named].input_size;
  const std::vector<int64_t> input{1, o.channels, o.input_size, o.input_size};
  resolve_family(o, hooks, trial_forward(module, o, input), input);
  Model model =
      wrap_imported(o, hooks, std::make_shared<ScriptImportedBody>(module, o.file), input);
  check_rebuilt(*model, module, o);
  return model;
}

}  // namespace

void register_torchscript_model(Registry<ModelSpec>& registry, std::vector<ImportHook> hooks) {
  ModelSpec spec;
  spec.family = "";
  spec.defaults = ImportedOptions().to_json(hooks);
  spec.make = [hooks = std::move(hooks)](const nlohmann::json& json) {
    return import_model(json, hooks);
  };
  registry.add("torchscript", std::move(spec),
               "torchscript:PATH, a model saved by torch.jit.script or torch.jit.trace "
               "(docs/byo-model.md)");
}

}  // namespace igb::models
