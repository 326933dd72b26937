#include "deploy/partition/stages.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/fs.h"

namespace igb::deploy {

namespace fs = std::filesystem;
namespace jit = torch::jit;
using json = nlohmann::json;

std::vector<Stage> split_stages(const tools::SummaryGraph& graph, const Assignment& assignment,
                                const std::vector<std::string>& device_names) {
  if (assignment.size() != graph.ops().size())
    throw InputError("a plan for " + std::to_string(assignment.size()) + " ops does not fit " +
                     graph.model_name() + "'s " + std::to_string(graph.ops().size()));
  const int k = static_cast<int>(device_names.size());
  std::vector<Stage> stages;
  std::vector<int> stage_of_device(k, -1);
  for (int d = 0; d < k; ++d) {
    if (std::find(assignment.begin(), assignment.end(), d) == assignment.end()) continue;
    stage_of_device[d] = static_cast<int>(stages.size());
    Stage s;
    s.index = static_cast<int>(stages.size());
    s.device = d;
    s.device_name = device_names[d];
    stages.push_back(s);
  }
  for (size_t i = 0; i < assignment.size(); ++i) {
    if (assignment[i] < 0 || assignment[i] >= k)
      throw InputError("op '" + graph.op(static_cast<int>(i)).name + "' is on no device");
    stages[stage_of_device[assignment[i]]].ops.push_back(static_cast<int>(i));
  }
  const std::set<int> model_outputs(graph.outputs().begin(), graph.outputs().end());
  for (auto& s : stages) {
    std::set<int> mine(s.ops.begin(), s.ops.end()), ins, outs;
    for (int o : s.ops) {
      for (int v : graph.op(o).inputs) {
        const int producer = graph.values().at(v).producer;
        if (producer < 0 || !mine.count(producer)) ins.insert(v);
      }
      for (int v : graph.op(o).outputs) {
        bool later = model_outputs.count(v) > 0;
        for (int r : graph.values().at(v).consumers) later = later || !mine.count(r);
        if (later) outs.insert(v);
      }
    }
    s.inputs.assign(ins.begin(), ins.end());
    s.outputs.assign(outs.begin(), outs.end());
  }
  return stages;
}

namespace {

bool is_tensor(const jit::Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

/// Summary-graph value ids of the traced values, numbered as the graph builder numbers them.
std::unordered_map<const jit::Value*, int> value_ids(const tools::SummaryGraph& graph) {
  std::unordered_map<const jit::Value*, int> id_of;
  size_t k = 0;
  for (const auto* in : graph.jit_graph()->inputs())
    if (is_tensor(in) && k < graph.inputs().size()) id_of[in] = graph.inputs()[k++];
  for (const auto& op : graph.ops()) {
    size_t slot = 0;
    for (const auto* out : graph.jit_node(op.id)->outputs())
      if (is_tensor(out) && slot < op.outputs.size()) id_of[out] = op.outputs[slot++];
  }
  return id_of;
}

}  // namespace

void run_stage(const tools::SummaryGraph& graph, const Stage& stage,
               std::map<int, at::Tensor>& values) {
  const auto id_of = value_ids(graph);
  std::unordered_map<const jit::Node*, int> op_of;
  for (const auto& op : graph.ops()) op_of[graph.jit_node(op.id)] = op.id;
  const std::set<int> mine(stage.ops.begin(), stage.ops.end());
  std::unordered_map<const jit::Value*, c10::IValue> env;
  for (const auto& [v, id] : id_of)
    if (auto it = values.find(id);
        it != values.end() && !mine.count(graph.values().at(id).producer))
      env[v] = it->second;
  for (jit::Node* node : graph.jit_graph()->nodes()) {
    if (node->kind() == c10::prim::Constant) {
      env[node->output()] = *jit::toIValue(node->output());
      continue;
    }
    auto op = op_of.find(node);
    const bool ours = op != op_of.end() && mine.count(op->second);
    if (op != op_of.end() && !ours) continue;
    jit::Stack stack;
    bool ready = true;
    for (const auto* in : node->inputs()) {
      auto e = env.find(in);
      if (e == env.end()) {
        ready = false;
        if (ours) {
          auto id = id_of.find(in);
          throw InputError("stage " + std::to_string(stage.index) + " (" + stage.device_name +
                           "): op '" + graph.op(op->second).name + "' reads " +
                           (id == id_of.end() ? std::string("a value")
                                              : "'" + onnx_value_name(graph, id->second) + "'") +
                           " that the stage was not given");
        }
        break;
      }
      stack.push_back(e->second);
    }
    if (!ready) continue;  // a helper node of another stage's ops
    tools::run_traced_node(node, stack);
    for (size_t i = 0; i < node->outputs().size(); ++i) env[node->outputs()[i]] = stack.at(i);
  }
  for (const auto& [v, id] : id_of)
    if (std::binary_search(stage.outputs.begin(), stage.outputs.end(), id)) {
      auto e = env.find(v);
      if (e == env.end() || !e->second.isTensor())
        throw InputError("stage " + std::to_string(stage.index) + " did not make '" +
                         onnx_value_name(graph, id) + "'");
      values[id] = e->second.toTensor();
    }
}

at::Tensor run_stages(const tools::SummaryGraph& graph, const std::vector<Stage>& stages,
                      const at::Tensor& input) {
  std::map<int, at::Tensor> values;
  if (graph.inputs().empty()) throw InputError(graph.model_name() + " has no input");
  values[graph.inputs()[0]] = input;
  for (const auto& s : stages) run_stage(graph, s, values);
  auto it = values.find(graph.outputs().at(0));
  if (it == values.end()) throw InputError("no stage made the output of " + graph.model_name());
  return it->second;
}

json export_stages(torch::nn::Module& model, const tools::SummaryGraph& graph,
                   const std::vector<Stage>& stages, const OnnxExportOptions& options,
                   const fs::path& dir) {
  fs::create_directories(dir);
  json manifest = {{"format", "igb stages"},
                   {"version", 1},
                   {"model", graph.model_name()},
                   {"input", graph.input_shape()},
                   {"precision", onnx_precision_name(options.precision())},
                   {"stages", json::array()}};
  auto io = [&](const std::vector<int>& ids) {
    json a = json::array();
    for (int v : ids)
      a.push_back({{"name", onnx_value_name(graph, v)},
                   {"shape", graph.shape(v)},
                   {"bytes_fp32", 4 * tools::volume(graph.shape(v))}});
    return a;
  };
  for (const auto& s : stages) {
    std::string device = s.device_name;
    for (char& c : device)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
    const std::string file = "stage" + std::to_string(s.index) + "_" + device + ".onnx";
    export_onnx_ops(model, graph, s.ops, s.inputs, s.outputs, options, dir / file);
    manifest["stages"].push_back({{"stage", s.index},
                                  {"device", s.device_name},
                                  {"file", file},
                                  {"ops", s.ops.size()},
                                  {"first_op", graph.op(s.ops.front()).name},
                                  {"last_op", graph.op(s.ops.back()).name},
                                  {"inputs", io(s.inputs)},
                                  {"outputs", io(s.outputs)}});
  }
  write_text_atomically(dir / "manifest.json", manifest.dump(1) + "\n");
  return manifest;
}

}  // namespace igb::deploy
