#include "deploy/partition/stages.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/fs.h"
#include "runtime/inference_model.h"

namespace igb::deploy {

namespace fs = std::filesystem;
namespace jit = torch::jit;
using json = nlohmann::json;

std::vector<Stage> split_stages(const graph::SummaryGraph& graph, const Assignment& assignment,
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
std::unordered_map<const jit::Value*, int> value_ids(const graph::SummaryGraph& graph) {
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

/// A stage compiled once: every node it runs, in trace order, with its operator and the slots of
/// its inputs and outputs in one environment vector.
struct StageRunner::Plan {
  struct Step {
    jit::Node* node = nullptr;
    /// The node's operator; empty for the list and tuple nodes run_traced_node handles itself.
    mutable jit::Operation op{nullptr};  // calling it is not const
    std::vector<size_t> in, out;
    /// The summary-graph op it is, or -1 for a helper node.
    int op_id = -1;
  };
  std::vector<Step> steps;
  /// Slots holding constants, filled once.
  std::vector<c10::IValue> initial;
  /// Where each value of the stage's input goes, and where each output is read.
  std::vector<std::pair<int, size_t>> inputs, outputs;
};

StageRunner::StageRunner(const graph::SummaryGraph& graph, Stage stage, bool inference, bool int8)
    : graph_(&graph), stage_(std::move(stage)), plan_(std::make_unique<Plan>()) {
  build_replay();
  runtime::InferenceOptions options;
  options.int8 = int8;
  if (inference)
    inference_ = std::make_unique<runtime::InferenceStage>(graph, stage_.ops, stage_.inputs,
                                                           stage_.outputs, options);
}

void StageRunner::build_replay() {
  const auto& graph = *graph_;
  const auto id_of = value_ids(graph);
  std::unordered_map<const jit::Node*, int> op_of;
  for (const auto& op : graph.ops()) op_of[graph.jit_node(op.id)] = op.id;
  const std::set<int> mine(stage_.ops.begin(), stage_.ops.end());
  std::unordered_map<const jit::Value*, size_t> slot;
  const auto slot_of = [&](const jit::Value* v) {
    auto [it, fresh] = slot.emplace(v, plan_->initial.size());
    if (fresh) plan_->initial.emplace_back();
    return it->second;
  };
  // Values the stage is given: its inputs, and the model's input wherever a helper reads it.
  std::set<int> given(stage_.inputs.begin(), stage_.inputs.end());
  given.insert(graph.inputs().begin(), graph.inputs().end());
  for (const auto& [v, id] : id_of)
    if (given.count(id) && !mine.count(graph.values().at(id).producer))
      plan_->inputs.emplace_back(id, slot_of(v));
  for (jit::Node* node : graph.jit_graph()->nodes()) {
    if (node->kind() == c10::prim::Constant) {
      plan_->initial[slot_of(node->output())] = *jit::toIValue(node->output());
      continue;
    }
    auto op = op_of.find(node);
    const bool ours = op != op_of.end() && mine.count(op->second);
    if (op != op_of.end() && !ours) continue;
    Plan::Step step;
    step.node = node;
    step.op_id = ours ? op->second : -1;
    bool ready = true;
    for (const auto* in : node->inputs()) {
      auto it = slot.find(in);
      if (it == slot.end()) {
        ready = false;
        if (ours) {
          auto id = id_of.find(in);
          throw InputError("stage " + std::to_string(stage_.index) + " (" + stage_.device_name +
                           "): op '" + graph.op(op->second).name + "' reads " +
                           (id == id_of.end() ? std::string("a value")
                                              : "'" + onnx_value_name(graph, id->second) + "'") +
                           " that the stage was not given");
        }
        break;
      }
      step.in.push_back(it->second);
    }
    if (!ready) continue;  // a helper node of another stage's ops
    const auto kind = node->kind();
    if (kind != c10::prim::ListConstruct && kind != c10::prim::TupleConstruct &&
        kind != c10::prim::ListUnpack)
      step.op = node->getOperation();
    for (const auto* out : node->outputs()) step.out.push_back(slot_of(out));
    plan_->steps.push_back(std::move(step));
  }
  for (const auto& [v, id] : id_of)
    if (std::binary_search(stage_.outputs.begin(), stage_.outputs.end(), id)) {
      auto it = slot.find(v);
      if (it == slot.end())
        throw InputError("stage " + std::to_string(stage_.index) + " does not make '" +
                         onnx_value_name(graph, id) + "'");
      plan_->outputs.emplace_back(id, it->second);
    }
}

StageRunner::~StageRunner() = default;

void StageRunner::run(std::map<int, at::Tensor>& values) const {
  if (inference_ && inference_->run(values)) return;
  std::vector<c10::IValue> env = plan_->initial;
  for (const auto& [id, s] : plan_->inputs)
    if (auto it = values.find(id); it != values.end()) env[s] = it->second;
  jit::Stack stack;
  for (const auto& step : plan_->steps) {
    stack.clear();
    for (size_t s : step.in) {
      if (env[s].isNone() && step.op_id >= 0 && !step.node->inputs().empty())
        for (const auto& [id, slot] : plan_->inputs)
          if (slot == s && !values.count(id))
            throw InputError("stage " + std::to_string(stage_.index) + " (" + stage_.device_name +
                             "): op '" + graph_->op(step.op_id).name + "' reads '" +
                             onnx_value_name(*graph_, id) + "' that the stage was not given");
      stack.push_back(env[s]);
    }
    if (step.op)
      step.op(stack);
    else
      graph::run_traced_node(step.node, stack);
    for (size_t i = 0; i < step.out.size(); ++i) env[step.out[i]] = std::move(stack.at(i));
  }
  for (const auto& [id, s] : plan_->outputs) {
    if (!env[s].isTensor())
      throw InputError("stage " + std::to_string(stage_.index) + " did not make '" +
                       onnx_value_name(*graph_, id) + "'");
    values[id] = env[s].toTensor();
  }
}

void run_stage(const graph::SummaryGraph& graph, const Stage& stage,
               std::map<int, at::Tensor>& values) {
  StageRunner(graph, stage).run(values);
}

at::Tensor run_stages(const graph::SummaryGraph& graph, const std::vector<Stage>& stages,
                      const at::Tensor& input) {
  std::map<int, at::Tensor> values;
  if (graph.inputs().empty()) throw InputError(graph.model_name() + " has no input");
  values[graph.inputs()[0]] = input;
  for (const auto& s : stages) run_stage(graph, s, values);
  auto it = values.find(graph.outputs().at(0));
  if (it == values.end()) throw InputError("no stage made the output of " + graph.model_name());
  return it->second;
}

json export_stages(torch::nn::Module& model, const graph::SummaryGraph& graph,
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
                   {"bytes_fp32", 4 * graph::volume(graph.shape(v))}});
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
