#include "models/onnx/onnx_model.h"

#include <ATen/Functions.h>

#include "core/error.h"
#include "models/import/imported_options.h"
#include "models/onnx/onnx_body.h"
#include "models/onnx/onnx_tensor.h"

namespace igb::models {

namespace {

using onnx_import::OnnxBody;
using onnx_import::OnnxGraph;

/// An ONNX graph rebuilt into the model (OnnxBody), built on zeros of the model's input.
class OnnxImportedBody final : public ImportedBody {
 public:
  OnnxImportedBody(std::shared_ptr<const OnnxGraph> graph, std::vector<int64_t> input)
      : graph_(std::move(graph)), input_(std::move(input)) {}
  void build(torch::nn::Module& owner) override {
    body_ = std::make_unique<OnnxBody>(graph_, owner, std::vector<at::Tensor>{at::zeros(input_)});
    owner.train(true);
  }
  at::Tensor forward(torch::nn::Module&, const at::Tensor& x) override {
    return body_->run({x}).at(0);
  }
  std::vector<SourceName> source_names() const override {
    std::vector<SourceName> out;
    for (const auto& n : body_->names()) out.push_back({n.onnx, n.igb, n.kind});
    return out;
  }

 private:
  std::shared_ptr<const OnnxGraph> graph_;
  std::vector<int64_t> input_;
  std::unique_ptr<OnnxBody> body_;
};

/// The graph must take one float image batch and give one tensor.
void check_interface(const OnnxGraph& g) {
  const std::string& f = g.file.path;
  if (g.inputs.size() != 1) {
    std::vector<std::string> names;
    for (const auto& in : g.inputs) names.push_back(in.name);
    throw InputError(f + ": the graph takes " + std::to_string(g.inputs.size()) + " inputs (" +
                     join(names) + "); igb models take one batch of images");
  }
  if (g.outputs.size() != 1)
    throw InputError(f + ": the graph gives " + std::to_string(g.outputs.size()) + " outputs (" +
                     join(g.outputs) + "); igb models return one tensor");
  const auto& in = g.inputs[0];
  if (in.elem_type != onnx_import::kOnnxFloat)
    throw InputError(f + ": input '" + in.name + "' holds " +
                     onnx_import::onnx_type_name(in.elem_type) +
                     " values; igb models take float images");
  if (in.dims.size() != 4)
    throw InputError(f + ": input '" + in.name + "' is " + std::to_string(in.dims.size()) +
                     "-D; igb models take [N, C, H, W] images");
}

/// The model's input [1, C, H, W]: the file's dimensions, the batch 1, channels and input_size
/// where given (and where the file names a dimension instead of fixing it).
std::vector<int64_t> model_input(const OnnxGraph& g, ImportedOptions& o) {
  const auto& in = g.inputs[0];
  std::vector<int64_t> shape{1, in.dims[1], in.dims[2], in.dims[3]};
  if (o.channels > 0) {
    if (in.dims[1] > 0 && in.dims[1] != o.channels)
      throw InputError(g.file.path + ": input '" + in.name + "' has " + std::to_string(in.dims[1]) +
                       " channels, not " + std::to_string(o.channels));
    shape[1] = o.channels;
  }
  if (o.input_size > 0) shape[2] = shape[3] = o.input_size;
  static const char* const kDims[] = {"", "channels", "height", "width"};
  std::vector<std::string> open;
  for (size_t d = 1; d < 4; ++d)
    if (shape[d] < 0) open.push_back(std::string(kDims[d]) + " '" + in.dim_names[d] + "'");
  if (!open.empty())
    throw InputError(g.file.path + ": input '" + in.name + "' has symbolic dimensions (" +
                     join(open) + "); give them with --model-arg input_size=N" +
                     (shape[1] < 0 ? " --model-arg channels=C" : ""));
  if (shape[1] * shape[2] > onnx_import::kMaxDimension / std::max<int64_t>(shape[3], 1))
    throw InputError(g.file.path + ": input '" + in.name + "' of " + std::to_string(shape[1]) +
                     "x" + std::to_string(shape[2]) + "x" + std::to_string(shape[3]) +
                     " holds more than 2^31 values");
  return shape;
}

Model import_onnx(const nlohmann::json& json, const std::vector<ImportHook>& hooks) {
  ImportedOptions defaults;
  defaults.input_size = 0;
  defaults.channels = 0;
  ImportedOptions o = read_imported_options("onnx", json, hooks, defaults);
  const auto graph = onnx_import::load_onnx_graph(o.file);
  const auto unsupported = onnx_import::unsupported_ops(*graph);
  if (!unsupported.empty())
    throw InputError(o.file + ": opset " + std::to_string(graph->file.opset) +
                     ": igb does not import " + join(unsupported) +
                     " (docs/onnx-import.md lists the operators it does)");
  onnx_import::check_onnx_model(graph->file);
  check_file_crc(o);
  check_interface(*graph);
  // A family named up front may fix the input (SR models take 32x32 patches).
  const size_t named = hook_index(hooks, o.family);
  if (named < hooks.size() && hooks[named].input_size != 0) o.input_size = hooks[named].input_size;
  const auto input = model_input(*graph, o);
  // The file's output on zeros tells the family (the body built into a module of its own).
  at::Tensor out;
  {
    torch::nn::Module scratch;
    OnnxBody trial(graph, scratch, {at::zeros(input)});
    torch::NoGradGuard no_grad;
    out = trial.run({at::zeros(input)}).at(0);
  }
  resolve_family(o, hooks, out, input);
  if (hook_index(hooks, o.family) < hooks.size() && input[2] != input[3])
    throw InputError(o.file + ": family " + o.family + " takes square inputs, the model's is " +
                     std::to_string(input[2]) + "x" + std::to_string(input[3]));
  if (o.channels == 0) o.channels = input[1];
  if (o.input_size == 0 && input[2] == input[3]) o.input_size = input[2];
  return wrap_imported(o, hooks, std::make_shared<OnnxImportedBody>(graph, input), input);
}

}  // namespace

void register_onnx_model(Registry<ModelSpec>& registry, std::vector<ImportHook> hooks) {
  ImportedOptions defaults;
  defaults.input_size = 0;
  defaults.channels = 0;
  defaults.hook_args.assign(hooks.size(), 0);
  ModelSpec spec;
  spec.family = "";
  spec.defaults = defaults.to_json(hooks);
  spec.make = [hooks = std::move(hooks)](const nlohmann::json& json) {
    return import_onnx(json, hooks);
  };
  registry.add("onnx", std::move(spec),
               "onnx:PATH, a model saved as ONNX by PyTorch, paddle2onnx, tf2onnx or any other "
               "exporter (docs/onnx-import.md)");
}

}  // namespace igb::models
