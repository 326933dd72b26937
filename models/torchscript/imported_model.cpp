#include "models/torchscript/imported_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/api/module.h>

#include <cstdio>
#include <filesystem>

#include "core/checkpoint.h"
#include "core/crc32c.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/train_mode_guard.h"
#include "models/classify/classifier.h"
#include "models/sr/sr_model.h"
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
  int64_t num_classes = 0;
  int64_t scale = 0;

  nlohmann::json to_json() const {
    nlohmann::json j{{"file", file},
                     {"crc32c", crc32c},
                     {"family", family},
                     {"input_size", input_size},
                     {"channels", channels}};
    if (family == "classify") j["num_classes"] = num_classes;
    if (family == "sr") j["scale"] = scale;
    return j;
  }
};

std::string file_crc32c(const std::string& file) {
  const std::string bytes = read_text_file(file);
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", crc32c(bytes.data(), bytes.size()));
  return hex;
}

/// The part every imported model shares: the mirrored TorchScript module and its options. The root
/// runs its own code too (ShapedByTensors: see ScriptedBlockImpl).
template <class Base>
class Imported : public Base, public ShapedByTensors {
 public:
  template <class... Args>
  Imported(const torch::jit::Module& module, ImportedOptions options, Args&&... base_args)
      : Base(std::forward<Args>(base_args)...), options_(std::move(options)) {
    body_.build(module, *this, options_.file);
  }

 protected:
  torch::Tensor forward_impl(torch::Tensor x) override {
    auto out = body_.run(*this, {std::move(x)});
    if (!out.isTensor())
      throw InputError(options_.file + ": forward returns a " + out.tagKind() +
                       "; igb models return one tensor");
    return out.toTensor();
  }

  ImportedOptions options_;
  ScriptBody body_;
};

class ImportedClassifier final : public Imported<classify::ClassifierImpl> {
 public:
  using Imported::Imported;

 protected:
  nlohmann::json architecture_options_json() const override { return options_.to_json(); }
};

class ImportedSr final : public Imported<sr::SrModelImpl> {
 public:
  using Imported::Imported;
  nlohmann::json options_json() const override { return options_.to_json(); }
};

class ImportedModel final : public Imported<ModelImpl> {
 public:
  ImportedModel(const torch::jit::Module& module, ImportedOptions options,
                std::vector<int64_t> input)
      : Imported(module, std::move(options)), input_(std::move(input)) {}
  std::vector<int64_t> input_shape() const override { return input_; }
  nlohmann::json options_json() const override { return options_.to_json(); }

 private:
  std::vector<int64_t> input_;
};

ImportedOptions read_options(const nlohmann::json& json) {
  ImportedOptions o;
  OptionReader r("torchscript", json);
  o.file = r.get<std::string>("file", "");
  o.crc32c = r.get<std::string>("crc32c", "");
  o.family = r.get<std::string>("family", o.family);
  o.input_size = r.get<int64_t>("input_size", o.input_size);
  r.check_range("input_size", o.input_size, 1, 8192);
  o.channels = r.get<int64_t>("channels", o.channels);
  r.check_range("channels", o.channels, 1, 4096);
  o.num_classes = r.get<int64_t>("num_classes", o.num_classes);
  r.check_range("num_classes", o.num_classes, 0, 1 << 24);
  o.scale = r.get<int64_t>("scale", o.scale);
  r.check_range("scale", o.scale, 0, 16);
  r.finish();
  if (o.file.empty())
    throw InputError("model torchscript: give the file as --model torchscript:PATH");
  if (o.family != "auto" && o.family != "classify" && o.family != "sr" && o.family != "model")
    throw InputError("model torchscript: option 'family' is '" + o.family +
                     "'; valid: auto, classify, sr, model");
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

/// Fixes the family (auto: read from the output's shape) and checks num_classes and scale.
void resolve_family(ImportedOptions& o, const at::Tensor& out) {
  const bool classifier = out.dim() == 2;
  const bool upscaler = out.dim() == 4 && out.size(1) == o.channels &&
                        out.size(2) % o.input_size == 0 && out.size(2) == out.size(3) &&
                        out.size(2) / o.input_size >= 2 && out.size(2) / o.input_size <= 4;
  if (o.family == "auto") o.family = classifier ? "classify" : upscaler ? "sr" : "model";
  if (o.family == "classify") {
    if (!classifier)
      throw InputError(o.file + ": family classify needs [N, classes] outputs; its forward gives " +
                       std::to_string(out.dim()) + "-D ones");
    if (o.num_classes != 0 && o.num_classes != out.size(1))
      throw InputError(o.file + ": the model gives " + std::to_string(out.size(1)) +
                       " class scores, not num_classes " + std::to_string(o.num_classes));
    o.num_classes = out.size(1);
  }
  if (o.family == "sr") {
    if (!upscaler)
      throw InputError(o.file +
                       ": family sr needs an output of the input's channels, 2-4 times "
                       "its height and width");
    const int64_t s = out.size(2) / o.input_size;
    if (o.scale != 0 && o.scale != s)
      throw InputError(o.file + ": the model upscales x" + std::to_string(s) + ", not x" +
                       std::to_string(o.scale));
    o.scale = s;
  }
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

Model import_model(const nlohmann::json& json) {
  ImportedOptions o = read_options(json);
  auto module = load_torchscript(o.file);
  const std::string crc = file_crc32c(o.file);
  if (!o.crc32c.empty() && o.crc32c != crc)
    throw InputError(o.file + " changed since the model was saved with it (CRC-32C " + crc +
                     ", recorded " + o.crc32c + ")");
  o.crc32c = crc;
  check_forward_inputs(module, o.file);
  const bool sr = o.family == "sr";
  const std::vector<int64_t> input{1, o.channels, sr ? 32 : o.input_size, sr ? 32 : o.input_size};
  if (sr) o.input_size = 32;
  resolve_family(o, trial_forward(module, o, input));
  Model model;
  if (o.family == "classify")
    model =
        std::make_shared<ImportedClassifier>(module, o, o.num_classes, o.channels, o.input_size);
  else if (o.family == "sr")
    model = std::make_shared<ImportedSr>(module, o, o.scale, o.channels);
  else
    model = std::make_shared<ImportedModel>(module, o, input);
  check_rebuilt(*model, module, o);
  return model;
}

}  // namespace

void register_torchscript_model(Registry<ModelSpec>& registry) {
  ModelSpec spec;
  spec.family = "";
  spec.make = import_model;
  spec.defaults = ImportedOptions().to_json();
  registry.add("torchscript", std::move(spec),
               "torchscript:PATH, a model saved by torch.jit.script or torch.jit.trace "
               "(docs/byo-model.md)");
}

}  // namespace igb::models
