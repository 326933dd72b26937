#include "models/torchscript/imported_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/api/module.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/checkpoint.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/train_mode_guard.h"
#include "models/torchscript/imported.h"
#include "models/torchscript/script_body.h"

namespace igb::models {

bool is_torchscript_model(const std::string& name) {
  return name.rfind(kTorchScriptPrefix, 0) == 0;
}

namespace {

/// The model args of an imported model, resolved.
struct ImportedOptions {
  std::string file;
  std::string crc32c;
  std::string family = "auto";
  int64_t input_size = 32;
  int64_t channels = 3;
  /// The value of the family hook's own arg (ImportHook::arg), 0 until given or resolved; by
  /// the hooks' order.
  std::vector<int64_t> hook_args;

  nlohmann::json to_json(const std::vector<ImportHook>& hooks) const {
    nlohmann::json j{{"file", file},
                     {"crc32c", crc32c},
                     {"family", family},
                     {"input_size", input_size},
                     {"channels", channels}};
    for (size_t i = 0; i < hooks.size(); ++i)
      if (family == hooks[i].family) j[hooks[i].arg] = hook_args[i];
    return j;
  }
};

std::string file_crc32c(const std::string& file) {
  const std::string bytes = read_text_file(file);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(bytes.data(), bytes.size()));
  return hex;
}

/// A model of no family the trainers take: the tools' fallback ("family" model).
class ImportedModel final : public Imported<ModelImpl> {
 public:
  ImportedModel(const torch::jit::Module& module, const ImportedArgs& args,
                std::vector<int64_t> input)
      : Imported(module, args), input_(std::move(input)) {}
  std::vector<int64_t> input_shape() const override { return input_; }
  nlohmann::json options_json() const override { return options_; }

 private:
  std::vector<int64_t> input_;
};

/// The index of family `name`'s hook; hooks.size() for none ("auto", "model").
size_t hook_index(const std::vector<ImportHook>& hooks, const std::string& name) {
  size_t i = 0;
  while (i < hooks.size() && hooks[i].family != name) ++i;
  return i;
}

/// The values of model arg "family": auto, each hook's family, model.
std::vector<std::string> family_choices(const std::vector<ImportHook>& hooks) {
  std::vector<std::string> out{"auto"};
  for (const auto& h : hooks) out.push_back(h.family);
  out.push_back("model");
  return out;
}

ImportedOptions read_options(const nlohmann::json& json, const std::vector<ImportHook>& hooks) {
  ImportedOptions o;
  OptionReader r("torchscript", json);
  o.file = r.get<std::string>("file", "");
  o.crc32c = r.get<std::string>("crc32c", "");
  o.family = r.get<std::string>("family", o.family);
  o.input_size = r.get<int64_t>("input_size", o.input_size);
  r.check_range("input_size", o.input_size, 1, 8192);
  o.channels = r.get<int64_t>("channels", o.channels);
  r.check_range("channels", o.channels, 1, 4096);
  for (const auto& h : hooks) {
    o.hook_args.push_back(r.get<int64_t>(h.arg, 0));
    r.check_range(h.arg, o.hook_args.back(), 0, h.arg_max);
  }
  r.finish();
  if (o.file.empty())
    throw InputError("model torchscript: give the file as --model torchscript:PATH");
  const auto families = family_choices(hooks);
  if (std::find(families.begin(), families.end(), o.family) == families.end())
    throw InputError("model torchscript: option 'family' is '" + o.family +
                     "'; valid: " + join(families));
  o.file = std::filesystem::absolute(o.file).lexically_normal().string();
  return o;
}

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

/// Fixes the family (auto: the first hook that recognises the output, else model) and lets its
/// hook check the output and resolve its arg.
void resolve_family(ImportedOptions& o, const std::vector<ImportHook>& hooks, const at::Tensor& out,
                    const std::vector<int64_t>& input) {
  if (o.family == "auto") {
    o.family = "model";
    for (const auto& h : hooks)
      if (h.recognises(out, input)) {
        o.family = h.family;
        break;
      }
  }
  const size_t i = hook_index(hooks, o.family);
  if (i < hooks.size()) o.hook_args[i] = hooks[i].resolve(out, input, o.hook_args[i], o.file);
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
  ImportedOptions o = read_options(json, hooks);
  auto module = load_torchscript(o.file);
  const std::string crc = file_crc32c(o.file);
  if (!o.crc32c.empty() && o.crc32c != crc)
    throw InputError(o.file + " changed since the model was saved with it (CRC-32C " + crc +
                     ", recorded " + o.crc32c + ")");
  o.crc32c = crc;
  check_forward_inputs(module, o.file);
  // A family named up front may fix the input (SR models take 32x32 patches).
  const size_t named = hook_index(hooks, o.family);
  if (named < hooks.size() && hooks[named].input_size != 0) o.input_size = hooks[named].input_size;
  const std::vector<int64_t> input{1, o.channels, o.input_size, o.input_size};
  resolve_family(o, hooks, trial_forward(module, o, input), input);
  ImportedArgs args;
  args.file = o.file;
  args.options = o.to_json(hooks);
  args.channels = o.channels;
  args.input_size = o.input_size;
  Model model;
  const size_t h = hook_index(hooks, o.family);
  if (h < hooks.size()) {
    args.value = o.hook_args[h];
    model = hooks[h].wrap(module, args);
  } else {
    model = std::make_shared<ImportedModel>(module, args, input);
  }
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
