// The plan compiler's fusion pass (runtime/plan_compiler.h): each layer with the ops run inside
// its primitive (a BatchNorm folded into its weights; activations and a residual add as
// post-ops; with InferenceOptions::int8, the fake quantizations it can write in integers), as
// one Chain emitted at the position of its last op.

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cmath>

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

namespace {

/// The value of elementwise function `e` at `x`, when the algorithm is one a gate's f is made of.
std::optional<double> eltwise_value(const EltwiseForm& e, double x) {
  using dnnl::algorithm;
  switch (e.algorithm) {
    case algorithm::eltwise_relu:
      return x > 0 ? x : e.alpha * x;
    case algorithm::eltwise_clip:
      return std::min<double>(std::max<double>(x, e.alpha), e.beta);
    case algorithm::eltwise_linear:
      return e.alpha * x + e.beta;
    case algorithm::eltwise_logistic:
      return 1 / (1 + std::exp(-x));
    case algorithm::eltwise_tanh:
      return std::tanh(x);
    default:
      return std::nullopt;
  }
}

/// The eltwise algorithm of x · f(x), when the composition `f` is the logistic sigmoid or the hard
/// sigmoid clip(x / 6 + 1/2, 0, 1): compared on a fine grid over [−12, 12] and at far points, to
/// within float32 rounding, so that every way of writing them (in whatever order of scale, shift
/// and clamp) is recognised and nothing else is.
std::optional<EltwiseForm> gated_form(const std::vector<EltwiseForm>& f) {
  bool sigmoid = true, hard = true;
  auto check = [&](double x) {
    double y = x;
    for (const auto& e : f) {
      auto v = eltwise_value(e, y);
      if (!v) return false;
      y = *v;
    }
    const double logistic = 1 / (1 + std::exp(-x));
    const double hard_sigmoid = std::min(std::max(x / 6 + 0.5, 0.0), 1.0);
    sigmoid = sigmoid && std::abs(y - logistic) <= 1e-6;
    hard = hard && std::abs(y - hard_sigmoid) <= 1e-6;
    return sigmoid || hard;
  };
  for (int i = -960; i <= 960; ++i)
    if (!check(i / 80.0)) return std::nullopt;
  for (double x : {-1e4, -100.0, 100.0, 1e4})
    if (!check(x)) return std::nullopt;
  if (sigmoid) return EltwiseForm{dnnl::algorithm::eltwise_swish, 1, 0};
  return EltwiseForm{dnnl::algorithm::eltwise_hardswish, 0, 0};
}

}  // namespace

/// The gate x · f(x) reading `x` (its two uses: f's first op and the product), when f's ops and the
/// product are this plan's and no chain took them.
std::optional<Gate> PlanCompiler::gate_of(const jit::Value* x) const {
  if (x->uses().size() != 2 || x->uses()[0].user == x->uses()[1].user) return std::nullopt;
  const auto op_at = [&](const jit::Node* n) {
    auto it = op_of_.find(n);
    return it == op_of_.end() || !ours(it->second) || claimed_.count(it->second) ? -1 : it->second;
  };
  for (int order = 0; order < 2; ++order) {
    const int product = op_at(x->uses()[order].user);
    int op = op_at(x->uses()[1 - order].user);
    if (product < 0 || op < 0 || g_.op(product).op_kind != OpKind::kMul ||
        g_.op(product).inputs.size() != 2)
      continue;
    const jit::Node* mul = g_.jit_node(product);
    if (mul->inputs().size() < 2 || shape_of(mul->output(0)) != shape_of(x)) continue;
    Gate gate;
    std::vector<EltwiseForm> f;
    const jit::Value* v = x;
    while (op >= 0 && op != product && f.size() < 6) {
      auto e = eltwise_form(g_, op);
      if (!e || g_.op(op).inputs.size() != 1) break;
      f.push_back(*e);
      gate.ops.push_back(op);
      v = g_.jit_node(op)->output(0);
      op = sole_user(v);
      if (op >= 0 && (!ours(op) || claimed_.count(op))) op = -1;
    }
    const jit::Value* other = mul->input(0) == x ? mul->input(1) : mul->input(0);
    if (op != product || f.empty() || v != other) continue;
    auto form = gated_form(f);
    if (!form) continue;
    gate.ops.push_back(product);
    gate.form = *form;
    gate.input = x;
    gate.output = mul->output(0);
    return gate;
  }
  return std::nullopt;
}

/// The gates no layer's chain took (their input a concatenation's, a pooling's, a LibTorch op's),
/// each one eltwise step at its product.
void PlanCompiler::plan_gates() {
  for (const auto& op : g_.ops()) {
    if (!ours(op.id) || claimed_.count(op.id) || op.op_kind != OpKind::kMul) continue;
    const jit::Node* mul = g_.jit_node(op.id);
    for (const jit::Value* x : mul->inputs()) {
      auto gate = gate_of(x);
      if (!gate || gate->ops.back() != op.id) continue;
      claimed_.insert(gate->ops.begin(), gate->ops.end());
      absorbed_.insert(gate->ops.begin(), gate->ops.end() - 1);
      gate_end_[op.id] = std::move(*gate);
      break;
    }
  }
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
      if (next >= 0 && extend(c, next)) continue;
      // x · sigmoid(x) and x · hardsigmoid(x): the layer's output is read twice.
      auto gate = next < 0 && last_use_of(c.output) != kGraphOutput && c.post_ops.size() < 3
                      ? gate_of(c.output)
                      : std::nullopt;
      if (!gate) break;
      c.post_ops.push_back({PostOp::Kind::kEltwise, gate->form, {}});
      c.ops.insert(c.ops.end(), gate->ops.begin(), gate->ops.end());
      c.output = gate->output;
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
  } else if (kind == OpKind::kAdd && add_form(g_, next)) {
    if (c.subpixel || c.skip || c.post_ops.size() >= 3) return false;
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
    if (!main_input) return false;
    // Two affine maps in a row (a hard sigmoid's scale, then its shift) are one.
    auto* last = c.post_ops.empty() ? nullptr : &c.post_ops.back();
    if (last && last->kind == PostOp::Kind::kEltwise &&
        last->eltwise.algorithm == dnnl::algorithm::eltwise_linear &&
        e->algorithm == dnnl::algorithm::eltwise_linear) {
      last->eltwise.beta = e->alpha * last->eltwise.beta + e->beta;
      last->eltwise.alpha *= e->alpha;
    } else {
      if (c.post_ops.size() >= 3) return false;
      c.post_ops.push_back({PostOp::Kind::kEltwise, *e, {}});
    }
  } else {
    return false;
  }
  c.ops.push_back(next);
  c.output = node->output(0);
  return true;
}

}  // namespace igb::runtime::compiler
