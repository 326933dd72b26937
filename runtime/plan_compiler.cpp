// The plan compiler's driver (runtime/plan_compiler.h): the region a plan computes, its inputs and
// outputs, the graph's nodes emitted in order, and compile_plan(), which also chooses the engine
// of a quantized plan's integer layers.

#include "runtime/plan_compiler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "core/table.h"
#include "runtime/qnnpack_layer.h"

namespace igb::runtime {

namespace compiler {

PlanCompiler::PlanCompiler(const graph::SummaryGraph& graph, const InferenceOptions& options,
                           const PlanRegion& region)
    : g_(graph), options_(options), region_(region), plan_(std::make_unique<Plan>()) {
  ours_.insert(region.ops.begin(), region.ops.end());
  whole_ = region.ops.empty() && region.inputs.empty() && region.outputs.empty();
}

std::unique_ptr<Plan> PlanCompiler::compile() {
  auto& graph = *g_.jit_graph();
  plan_->graph = g_.jit_graph();
  index_graph();
  declare_inputs();
  if (options_.native) {
    plan_chains();
    if (options_.fuse) plan_gates();
    plan_shuffles();
  }
  size_t position = 0;
  for (jit::Node* node : graph.nodes()) {
    if (in_region(node)) emit_node(node, position);
    ++position;
  }
  declare_outputs();
  drop_unread_inputs();
  plan_->constant.assign(plan_->env.size(), false);
  for (const auto& [v, info] : values_)
    if (info.constant) plan_->constant[info.slot] = true;
  plan_->allocate();
  return std::move(plan_);
}

// ----- Region -------------------------------------------------------------------------------

/// Whether the plan runs `node`: every node of the whole graph; of a stage, its ops and the
/// helper nodes whose inputs it has (a constant, a size read, a list of its values).
bool PlanCompiler::in_region(const jit::Node* node) const {
  if (whole_ || node->kind() == c10::prim::Constant) return true;
  auto it = op_of_.find(node);
  if (it != op_of_.end()) return ours_.count(it->second) > 0;
  for (const jit::Value* in : node->inputs())
    if (!has_slot(in)) return false;
  return true;
}

void PlanCompiler::add_input(const jit::Value* v, int id) {
  ValueInfo& info = value(v);
  info.plain = true;
  plan_->inputs.emplace_back(id, info.slot);
  plan_->input_shapes.push_back(shape_of(v));
  // Another stage's fake-quantized value arrives as float on its grid: 8 bits hold it exactly.
  if (auto grid = options_.int8 ? grid_of(v) : std::nullopt) info.grid = held_on(*grid);
}

void PlanCompiler::declare_inputs() {
  const jit::Value* model_input = g_.jit_graph()->inputs().at(0);
  if (whole_) {
    add_input(model_input, g_.inputs().empty() ? -1 : g_.inputs()[0]);
    return;
  }
  std::set<int> given(region_.inputs.begin(), region_.inputs.end());
  given.insert(g_.inputs().begin(), g_.inputs().end());
  for (int id : given) {
    auto it = value_of_id_.find(id);
    const int producer = g_.values().at(id).producer;
    if (it != value_of_id_.end() && (producer < 0 || !ours(producer))) add_input(it->second, id);
  }
}

/// A stage is offered the model's input (for size reads of it); when none of its nodes reads
/// it and it was not given as one of the stage's inputs, the stage does not ask for it, so a
/// later stage runs on its own inputs alone.
void PlanCompiler::drop_unread_inputs() {
  if (whole_) return;
  std::unordered_set<const jit::Value*> read;
  for (jit::Node* node : g_.jit_graph()->nodes())
    if (in_region(node)) read.insert(node->inputs().begin(), node->inputs().end());
  const std::set<int> given(region_.inputs.begin(), region_.inputs.end());
  for (size_t i = plan_->inputs.size(); i-- > 0;) {
    const int id = plan_->inputs[i].first;
    if (given.count(id) || read.count(value_of_id_.at(id))) continue;
    plan_->inputs.erase(plan_->inputs.begin() + static_cast<std::ptrdiff_t>(i));
    plan_->input_shapes.erase(plan_->input_shapes.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void PlanCompiler::declare_outputs() {
  if (whole_) {
    const jit::Value* output = g_.jit_graph()->outputs().at(0);
    ensure_plain(output);
    plan_->outputs.emplace_back(-1, slot(output));
    return;
  }
  for (int id : region_.outputs) {
    const jit::Value* v = value_of_id_.at(id);
    ensure_plain(v);
    plan_->outputs.emplace_back(id, slot(v));
  }
}

void PlanCompiler::index_graph() {
  auto& graph = *g_.jit_graph();
  size_t k = 0;
  for (const jit::Value* in : graph.inputs())
    if (in->type()->cast<c10::TensorType>() && k < g_.inputs().size())
      values_[in].id = g_.inputs()[k++];
  for (const auto& op : g_.ops()) {
    jit::Node* node = g_.jit_node(op.id);
    op_of_[node] = op.id;
    size_t slot_index = 0;
    for (const jit::Value* out : node->outputs())
      if (out->type()->cast<c10::TensorType>() && slot_index < op.outputs.size())
        values_[out].id = op.outputs[slot_index++];
  }
  size_t position = 0;
  for (jit::Node* node : graph.nodes()) {
    position_[node] = position;
    for (const jit::Value* in : node->inputs()) values_[in].last_use = position;
    ++position;
  }
  for (const jit::Value* out : graph.outputs()) values_[out].last_use = kGraphOutput;
  for (const auto& [v, info] : values_)
    if (info.id) value_of_id_[*info.id] = v;
  // A stage's outputs are read after its last step: no step may write over them in place.
  for (int id : region_.outputs)
    if (auto it = value_of_id_.find(id); it != value_of_id_.end())
      values_[it->second].last_use = kGraphOutput;
}

// ----- Emission -----------------------------------------------------------------------------

void PlanCompiler::emit_node(jit::Node* node, size_t position) {
  if (node->kind() == c10::prim::Constant) {
    ValueInfo& info = value(node->output());
    plan_->env[info.slot] = *jit::toIValue(node->output());
    info.plain = info.constant = true;
    return;
  }
  if (foldable(node)) {
    fold_constant(node);
    return;
  }
  if (node->kind() == c10::prim::ListConstruct) {
    deferred_lists_.insert(node);  // made when a LibTorch step reads it
    return;
  }
  auto it = op_of_.find(node);
  if (it != op_of_.end() && options_.native) {
    const int op = it->second;
    auto chain = chain_end_.find(op);
    if (chain != chain_end_.end()) {
      emit_chain(chain->second);
      return;
    }
    if (auto gate = gate_end_.find(op); gate != gate_end_.end()) {
      emit_gate(gate->second);
      return;
    }
    if (auto shuffle = shuffle_end_.find(op); shuffle != shuffle_end_.end()) {
      if (!emit_shuffle(shuffle->second))
        for (int part : shuffle->second.ops) emit_torch(g_.jit_node(part));
      return;
    }
    if (absorbed_.count(op) || emit_single(op)) return;
  }
  emit_torch(node);
}

bool PlanCompiler::emit_single(int op) {
  const auto kind = g_.op(op).op_kind;
  if (kind == OpKind::kFakeQuantize) return options_.int8 && emit_quantize(op);
  if ((kind == OpKind::kSlice || kind == OpKind::kPad) && options_.int8 && emit_int8_view(op))
    return true;
  if (kind == OpKind::kSlice) return emit_slice(op);
  if (kind == OpKind::kPad) return false;
  if (kind == OpKind::kPReLU) return emit_prelu(op);
  if (kind == OpKind::kMaxPool || kind == OpKind::kAvgPool || kind == OpKind::kAdaptiveAvgPool)
    return emit_pool(op);
  if (kind == OpKind::kConcat) return emit_concat(op);
  if (kind == OpKind::kBatchNorm) return emit_batchnorm(op);
  return emit_eltwise(op) || emit_binary(op);
}

StepInfo PlanCompiler::info_of(const std::vector<int>& ops, const std::string& kind) const {
  StepInfo info;
  info.name = g_.op(ops.front()).name;
  info.kind = kind;
  for (int op : ops) {
    info.ops.push_back(g_.op(op).name);
    info.macs += g_.macs(op);
    if (kind.empty()) info.kind += (info.kind.empty() ? "" : "+") + g_.op(op).type;
  }
  return info;
}

}  // namespace compiler

namespace {

/// Median milliseconds of `plan` over 5 runs (after one) on random inputs of its shapes.
double time_plan(Plan& plan) {
  // A generator of its own: compiling a plan leaves the global random state as it was.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  std::map<int, at::Tensor> values;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    values[plan.inputs[i].first] = at::randn(plan.input_shapes[i], generator);
  std::vector<double> times;
  for (int r = 0; r < 6; ++r) {
    auto given = values;
    const auto t0 = std::chrono::steady_clock::now();
    plan.run_values(given);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin() + 1, times.end());
  return times[3];
}

}  // namespace

std::unique_ptr<Plan> compile_plan(const graph::SummaryGraph& graph,
                                   const InferenceOptions& options, const PlanRegion& region) {
  using compiler::PlanCompiler;
  if (!options.int8) return PlanCompiler(graph, options, region).compile();
  if (options.int8_engine == Int8Engine::kOneDnn) {
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "oneDNN (as asked)";
    return plan;
  }
  if (!qnnpack_available()) {
    if (options.int8_engine == Int8Engine::kQnnpack)
      throw InputError("--int8-engine qnnpack: this LibTorch has no QNNPACK engine");
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "oneDNN (this LibTorch has no QNNPACK)";
    return plan;
  }
  if (options.int8_engine == Int8Engine::kQnnpack) {
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "QNNPACK (as asked)";
    return plan;
  }
  // kAuto: the two engines timed on this shape; the faster is kept.
  InferenceOptions each = options;
  each.int8_engine = Int8Engine::kOneDnn;
  auto onednn = PlanCompiler(graph, each, region).compile();
  each.int8_engine = Int8Engine::kQnnpack;
  auto qnnpack = PlanCompiler(graph, each, region).compile();
  const bool any = std::any_of(qnnpack->steps.begin(), qnnpack->steps.end(),
                               [](const auto& s) { return s->info.qnnpack; });
  if (!any) {
    onednn->int8_engine = "oneDNN (no layer QNNPACK can take)";
    return onednn;
  }
  torch::NoGradGuard no_grad;
  const double a = time_plan(*onednn), b = time_plan(*qnnpack);
  auto& kept = a <= b ? onednn : qnnpack;
  kept->int8_engine = std::string(a <= b ? "oneDNN" : "QNNPACK") + ", timed faster (oneDNN " +
                      fixed(a, 3) + " ms, QNNPACK " + fixed(b, 3) + " ms)";
  return std::move(kept);
}

}  // namespace igb::runtime
