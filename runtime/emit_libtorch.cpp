// The plan compiler's LibTorch fallback (runtime/plan_compiler.h): an op with no oneDNN form run
// as LibTorch's operator on plain tensors, and a node of constant inputs run once while
// compiling.

#include <torch/csrc/jit/ir/ir.h>

#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

/// A node computing the same value on every run (its inputs all constants, no randomness, no
/// mutation): run once now (a weight's transpose before a traced Linear).
bool PlanCompiler::foldable(const jit::Node* node) const {
  if (node->kind() == c10::prim::ListConstruct || node->isNondeterministic() ||
      node->outputs().empty() || node->inputs().empty())
    return false;
  const std::string kind = node->kind().toQualString();
  if (kind.back() == '_') return false;
  for (const jit::Value* in : node->inputs()) {
    auto it = values_.find(in);
    if (it == values_.end() || !it->second.constant) return false;
  }
  return true;
}

void PlanCompiler::fold_constant(const jit::Node* node) {
  torch::jit::Stack stack;
  for (const jit::Value* in : node->inputs()) stack.push_back(plan_->env[slot(in)]);
  graph::run_traced_node(const_cast<jit::Node*>(node), stack);
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    ValueInfo& info = value(node->output(i));
    plan_->env[info.slot] = std::move(stack.at(i));
    info.plain = info.constant = true;
  }
}

void PlanCompiler::emit_torch(const jit::Node* node) {
  std::vector<int> inputs, outputs;
  for (const jit::Value* in : node->inputs()) {
    ensure_plain(in);
    inputs.push_back(slot(in));
  }
  for (const jit::Value* out : node->outputs()) {
    ValueInfo& info = value(out);
    outputs.push_back(info.slot);
    info.plain = true;
    if (!options_.int8 || !out->type()->cast<c10::TensorType>()) continue;
    if (auto grid = grid_of(out)) info.grid = held_on(*grid);
  }
  // The plan holds the graph; running a node does not change it.
  auto step = std::make_unique<TorchStep>(const_cast<jit::Node*>(node), inputs, outputs);
  auto it = op_of_.find(node);
  if (it != op_of_.end()) {
    step->info.name = g_.op(it->second).name;
    step->info.ops = {g_.op(it->second).name};
    step->info.macs = g_.macs(it->second);
  } else {
    step->info.name = step->info.kind;
  }
  plan_->add_step(std::move(step));
}

}  // namespace igb::runtime::compiler
