#include "deploy/onnx/onnx_layer_check.h"

#include <onnx/onnx_pb.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/train_mode_guard.h"

namespace igb::deploy {

namespace fs = std::filesystem;

namespace {

/// A copy of `model` with each of `names` also a graph output (float32, shape left to the
/// runtime), written to `out`.
void write_with_outputs(const fs::path& model, const std::vector<std::string>& names,
                        const fs::path& out) {
  std::ifstream in(model, std::ios::binary);
  onnx::ModelProto proto;
  if (!in || !proto.ParseFromIstream(&in))
    throw InputError(model.string() + ": cannot read the ONNX model back");
  std::set<std::string> outputs;
  for (const auto& o : proto.graph().output()) outputs.insert(o.name());
  for (const auto& name : names) {
    if (!outputs.insert(name).second) continue;
    auto* o = proto.mutable_graph()->add_output();
    o->set_name(name);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  fs::create_directories(out.parent_path());
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file || !proto.SerializeToOstream(&file) || !file.flush())
    throw InputError(out.string() + ": cannot write the layer-by-layer copy of the model");
}

}  // namespace

double OnnxLayerCheck::worst_within_one_step() const {
  double worst = 1;
  for (const auto& l : layers) worst = std::min(worst, l.within_one_step);
  return worst;
}

OnnxLayerCheck check_qdq_layers(torch::nn::Module& model, const SummaryGraph& graph,
                                const OnnxExportReport& report, const at::Tensor& x,
                                const fs::path& work_dir, const OnnxRuntimeOptions& options) {
  if (report.quantized_values.empty())
    throw InputError(report.path.string() +
                     ": no fake quantization op was written as QuantizeLinear/DequantizeLinear, "
                     "so there is no quantized layer to compare");
  std::vector<std::string> names;
  std::map<int, size_t> index_of;
  for (size_t i = 0; i < report.quantized_values.size(); ++i) {
    names.push_back(report.quantized_values[i].onnx_name);
    index_of[report.quantized_values[i].value] = i;
  }
  const fs::path copy = work_dir / "layers.onnx";
  write_with_outputs(report.path, names, copy);
  const auto outputs = OnnxRuntimeRunner(copy, work_dir, options).run_all(x);
  std::map<std::string, at::Tensor> theirs(outputs.begin(), outputs.end());

  OnnxLayerCheck check;
  check.layers.resize(report.quantized_values.size());
  std::vector<bool> seen(report.quantized_values.size(), false);
  TrainModeGuard eval(model, /*train=*/false);
  torch::NoGradGuard no_grad;
  const auto ours = replay_trace(graph, x, [&](int value, at::Tensor& t) {
    const auto it = index_of.find(value);
    if (it == index_of.end()) return;
    const auto& q = report.quantized_values[it->second];
    auto& a = check.layers[it->second];
    const at::Tensor& ref = theirs.at(q.onnx_name);
    if (ref.sizes() != t.sizes())
      throw InputError(report.path.string() + ": onnxruntime's " + q.onnx_name +
                       " has another shape than the model's value at layer " + q.layer);
    const auto steps = (t.to(at::kFloat) - ref).abs() / q.scale;
    a.layer = q.layer;
    a.onnx_name = q.onnx_name;
    a.scale = q.scale;
    a.elements = t.numel();
    // Grid values differ by whole steps; the slack absorbs the float error of x·scale.
    a.exact = (steps < 0.5).to(at::kDouble).mean().item<double>();
    a.within_one_step = (steps <= 1 + 1e-3).to(at::kDouble).mean().item<double>();
    a.max_steps = a.elements ? steps.max().item<double>() : 0;
    seen[it->second] = true;
    t = ref.to(t.dtype());
  });
  for (size_t i = 0; i < seen.size(); ++i)
    if (!seen[i])
      throw InputError(report.path.string() + ": layer " + report.quantized_values[i].layer +
                       " was not reached when the model's trace was replayed");
  const at::Tensor& out = outputs.front().second;
  if (out.sizes() != ours.sizes())
    throw InputError(report.path.string() +
                     ": onnxruntime's output has another shape than the "
                     "model's");
  check.output_max_abs = (ours.to(at::kFloat) - out).abs().max().item<double>();
  check.output_max = ours.abs().max().item<double>();
  return check;
}

}  // namespace igb::deploy
