// The summary graph's walks: the ops of a module, an op's neighbours, the parametric layers a
// channel change reaches through the ops that only carry channels, and replaying the trace op by
// op. Building the graph from a trace is summary_graph.cpp.
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "core/jit_containers.h"
#include "graph/summary_graph.h"

namespace igb::graph {

std::vector<int> SummaryGraph::ops_of_module(const std::string& module) const {
  std::vector<int> out;
  for (const auto& op : ops_)
    if (op.module == module) out.push_back(op.id);
  return out;
}

std::vector<int> SummaryGraph::predecessors(int op) const {
  std::vector<int> out;
  for (int v : ops_.at(op).inputs) {
    int p = values_[v].producer;
    if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> SummaryGraph::successors(int op) const {
  std::vector<int> out;
  for (int v : ops_.at(op).outputs)
    for (int c : values_[v].consumers)
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

void add_unique(std::vector<Reach>& out, Reach r) {
  for (const auto& e : out)
    if (e.op == r.op && e.slot == r.slot && e.offset == r.offset && e.block == r.block) return;
  out.push_back(std::move(r));
}

}  // namespace

std::vector<Shape> SummaryGraph::input_shapes(int op) const {
  std::vector<Shape> out;
  for (int v : ops_.at(op).inputs) out.push_back(values_[v].shape);
  return out;
}

ChannelLink SummaryGraph::link(int op, int slot) const {
  const auto& o = ops_.at(op);
  if (o.outputs.empty()) return {};
  return channel_link(o, slot, input_shapes(op), values_[o.outputs[0]].shape);
}

std::vector<Reach> SummaryGraph::parametric_successors(int op) const {
  using Kind = ChannelLink::Kind;
  std::vector<Reach> out;
  std::set<std::tuple<int, int64_t, int64_t>> seen;
  std::function<void(int, int64_t, int64_t, std::vector<int>)> walk =
      [&](int v, int64_t offset, int64_t block, std::vector<int> via) {
        if (!seen.insert({v, offset, block}).second) return;
        for (int c : values_[v].consumers) {
          const auto& o = ops_[c];
          for (int slot = 0; slot < static_cast<int>(o.inputs.size()); ++slot) {
            if (o.inputs[slot] != v) continue;
            Reach r{c, slot, offset, block, false, via};
            if (o.parametric()) {
              add_unique(out, r);
              continue;
            }
            if (o.outputs.empty()) continue;
            auto next = via;
            next.push_back(c);
            const ChannelLink l = link(c, slot);
            if (l.kind == Kind::kSame) {
              walk(o.outputs[0], offset + l.offset, block, next);
            } else if (l.kind == Kind::kBlock) {
              walk(o.outputs[0], offset * l.block + l.offset, block * l.block, next);
            } else {
              r.barrier = true;
              add_unique(out, r);
            }
          }
        }
      };
  for (int v : ops_.at(op).outputs) walk(v, 0, 1, {});
  return out;
}

std::vector<Reach> SummaryGraph::parametric_predecessors(int op) const {
  using Kind = ChannelLink::Kind;
  std::vector<Reach> out;
  std::function<void(int, int, int64_t, int64_t, std::vector<int>)> walk =
      [&](int v, int slot, int64_t offset, int64_t block, std::vector<int> via) {
        int p = values_[v].producer;
        if (p < 0) return;
        const auto& o = ops_[p];
        Reach r{p, slot, offset, block, false, via};
        if (o.parametric()) {
          add_unique(out, r);
          return;
        }
        auto next = via;
        next.push_back(p);
        bool followed = false;
        for (int k = 0; k < static_cast<int>(o.inputs.size()); ++k) {
          const ChannelLink l = link(p, k);
          if (l.kind == Kind::kSame) {
            walk(o.inputs[k], slot, offset + l.offset * block, block, next);
            followed = true;
          } else if (l.kind == Kind::kBlock && block == 1) {
            walk(o.inputs[k], slot, offset + l.offset, l.block, next);
            followed = true;
          } else if (l.kind == Kind::kBroadcast) {
            followed = true;  // a one-channel input writes no channel of its own
          }
        }
        if (!followed) {
          r.barrier = true;
          add_unique(out, r);
        }
      };
  const auto& o = ops_.at(op);
  for (int slot = 0; slot < static_cast<int>(o.inputs.size()); ++slot)
    walk(o.inputs[slot], slot, 0, 1, {});
  return out;
}

void run_traced_node(torch::jit::Node* node, torch::jit::Stack& stack) {
  if (!run_container_node(node, stack)) node->getOperation()(stack);
}

at::Tensor replay_trace(const SummaryGraph& graph, const at::Tensor& input,
                        const TraceVisitor& visit) {
  namespace jit = torch::jit;
  auto& g = *graph.jit_graph();
  const auto is_tensor = [](const jit::Value* v) {
    return v->type()->cast<c10::TensorType>() != nullptr;
  };
  // Summary-graph value ids of the traced values, in the order GraphBuilder numbered them.
  std::unordered_map<const jit::Value*, int> id_of;
  size_t k = 0;
  for (const auto* in : g.inputs())
    if (is_tensor(in) && k < graph.inputs().size()) id_of[in] = graph.inputs()[k++];
  for (const auto& op : graph.ops()) {
    size_t slot = 0;
    for (const auto* out : graph.jit_node(op.id)->outputs())
      if (is_tensor(out) && slot < op.outputs.size()) id_of[out] = op.outputs[slot++];
  }
  std::unordered_map<const jit::Value*, c10::IValue> env;
  const auto seen = [&](const jit::Value* v, c10::IValue& value) {
    auto it = id_of.find(v);
    if (it == id_of.end() || !value.isTensor() || !visit) return;
    at::Tensor t = value.toTensor();
    visit(it->second, t);
    value = t;
  };
  c10::IValue first = input;
  seen(g.inputs()[0], first);
  env[g.inputs()[0]] = first;
  for (jit::Node* node : g.nodes()) {
    if (node->kind() == c10::prim::Constant) {
      env[node->output()] = *jit::toIValue(node->output());
      continue;
    }
    jit::Stack stack;
    for (const auto* in : node->inputs()) stack.push_back(env.at(in));
    run_traced_node(node, stack);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      seen(node->outputs()[i], stack.at(i));
      env[node->outputs()[i]] = stack.at(i);
    }
  }
  const auto& out = env.at(g.outputs()[0]);
  if (out.isTensor()) return out.toTensor();
  if (out.isTuple()) return out.toTupleRef().elements().at(0).toTensor();
  throw InputError("model " + graph.model_name() + ": the traced graph returns no tensor");
}

}  // namespace igb::graph
