// The plan compiler's fusion pass (runtime/plan_compiler.h): each layer with the ops run inside
// its primitive (a BatchNorm folded into its weights; activations and a residual add as
// post-ops; with InferenceOptions::int8, the fake quantizations it can write in integers), as
// one Chain emitted at the position of its last op.

#include <torch/csrc/jit/ir/ir.h>

#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

bool subpixel_pays(const LayerForm& f) {
  return f.kind == LayerForm::Kind::kTransposedConvolution && f.groups == 1 && f.dilation[0] == 1 &&
         f.dilation[1] == 1 && f.stride[0] == f.stride[1] && f.stride[0] > 1;
}

/// The op consuming `v` when it is `v`'s only use and `v` is not a graph output, else -1.
int PlanCompiler::sole_user(const jit::Value* v) const {
  if (v->uses().size() != 1 || last_use_of(v) == kGraphOutput) return -1;
  auto it = op_of_.find(v->uses()[0].user);
  return it == op_of_.end() ? -1 : it->second;
}

void PlanCompiler::plan_chains() {
  for (const auto& op : g_.ops()) {
    if (!ours(op.id) || claimed_.count(op.id) || !layer_form(g_, op.id)) continue;
    Chain c;
    c.ops = {op.id};
    c.subpixel = subpixel_pays(*layer_form(g_, op.id));
    c.output = g_.jit_node(op.id)->output(0);
    while (options_.fuse) {
      const int next = sole_user(c.output);
      if (next < 0 || !extend(c, next)) break;
    }
    if (options_.int8) absorb_quantization(c);
    for (size_t i = 0; i + 1 < c.ops.size(); ++i) absorbed_.insert(c.ops[i]);
    claimed_.insert(c.ops.begin(), c.ops.end());
    chain_end_[c.ops.back()] = std::move(c);
  }
}

/// The integer grid of layer `op`'s weights: of its quantizer's bits, or of 8 bits when no
/// quantizer recorded them (post-training quantization writes the quantized values in place).
std::optional<IntegerWeights> PlanCompiler::layer_grid(int op, const at::Tensor& weight) const {
  const int64_t bits = g_.op(op).weight_bits;
  return integer_weights(weight, bits > 0 ? bits : 8);
}

/// Ends the layer chain `c` with the fake quantization(s) after it when the layer can run in
/// integers and write that grid: its input held in 8 bits, its weights on an integer grid, only
/// ReLUs and clamps after it (they commute with the output scale), and a residual add's other
/// operand on a grid of the output's type. Each quantization's range becomes a clamp post-op;
/// a ReLU or clamp between two quantizations of one step (Distiller's post-training
/// quantization of a layer's output and then of its ReLU's) is fused as well.
void PlanCompiler::absorb_quantization(Chain& c) {
  const auto f = layer_form(g_, c.ops.front());
  if (c.subpixel || f->kind == LayerForm::Kind::kTransposedConvolution || !grid_of(f->input) ||
      !layer_grid(c.ops.front(), f->weight))
    return;
  auto scale_free = [](const EltwiseForm& e) {
    return e.algorithm == dnnl::algorithm::eltwise_clip ||
           (e.algorithm == dnnl::algorithm::eltwise_relu && e.alpha == 0);
  };
  for (const auto& p : c.post_ops)
    if (p.kind == PostOp::Kind::kEltwise && !scale_free(p.eltwise)) return;
  Chain q = c;
  std::optional<QuantForm> last;
  for (;;) {
    const int next = sole_user(q.output);
    if (next < 0 || claimed_.count(next) || !ours(next)) break;
    auto grid = quant_form(g_, next);
    auto e = grid ? std::nullopt : eltwise_form(g_, next);
    if (grid && last && grid->scale != last->scale) break;
    if (!grid && (!last || !e || !scale_free(*e))) break;
    if (grid) {
      last = grid;
      q.quantize = next;
      e = EltwiseForm{dnnl::algorithm::eltwise_clip, static_cast<float>(grid->lo * grid->scale),
                      static_cast<float>(grid->hi * grid->scale)};
    }
    q.post_ops.push_back({PostOp::Kind::kEltwise, *e, {}});
    q.ops.push_back(next);
    q.output = g_.jit_node(next)->output(0);
  }
  if (!last) return;
  while (q.ops.back() != q.quantize) {  // ends on the last quantization
    q.ops.pop_back();
    q.post_ops.pop_back();
  }
  q.output = g_.jit_node(q.quantize)->output(0);
  if (c.skip) {
    auto skip = grid_of(c.skip);
    if (!skip || skip->is_unsigned != last->is_unsigned) return;
  }
  q.float_ops = c.ops.size();
  q.float_post_ops = c.post_ops.size();
  c = std::move(q);
}

bool PlanCompiler::extend(Chain& c, int next) {
  // Another layer's chain took it first, or another stage runs it.
  if (claimed_.count(next) || !ours(next)) return false;
  jit::Node* node = g_.jit_node(next);
  const auto kind = g_.op(next).op_kind;
  const bool main_input = node->inputs().size() > 0 && node->input(0) == c.output;
  if (kind == OpKind::kBatchNorm) {
    if (c.batchnorm >= 0 || !c.post_ops.empty() || !main_input || !batchnorm_form(g_, next))
      return false;
    c.batchnorm = next;
  } else if (kind == OpKind::kAdd) {
    if (c.subpixel || c.skip || c.post_ops.size() >= 3 || !add_form(g_, next)) return false;
    const jit::Value* a = node->input(0);
    const jit::Value* b = node->input(1);
    if ((a == c.output) == (b == c.output)) return false;
    c.skip = a == c.output ? b : a;
    c.add = next;
    c.post_ops.push_back({PostOp::Kind::kSum, {}, {}});
  } else if (g_.op(next).op_kind == OpKind::kPReLU) {
    // oneDNN 2.6 has no JIT convolution with a PReLU post-op: the reference kernel it falls
    // back to made FSRCNN 60x slower. PReLU runs as its own primitive after the layer.
    return false;
  } else if (auto e = eltwise_form(g_, next)) {
    if (!main_input || c.post_ops.size() >= 3) return false;
    c.post_ops.push_back({PostOp::Kind::kEltwise, *e, {}});
  } else {
    return false;
  }
  c.ops.push_back(next);
  c.output = node->output(0);
  return true;
}

}  // namespace igb::runtime::compiler
