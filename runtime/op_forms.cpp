#include "runtime/op_forms.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "core/jit_containers.h"
#include "graph/summary_graph.h"

namespace igb::runtime {

namespace {

namespace jit = torch::jit;
using graph::OpKind;

const jit::Value* arg(const jit::Node* node, const char* name) {
  return schema_argument(node, name);
}

/// A constant float tensor (defined, on the CPU) behind argument `name`.
std::optional<at::Tensor> constant_tensor(const jit::Node* node, const char* name) {
  const jit::Value* v = arg(node, name);
  if (!v || v->node()->kind() != c10::prim::Constant) return std::nullopt;
  auto iv = jit::toIValue(v);
  if (!iv || !iv->isTensor()) return std::nullopt;
  const at::Tensor t = iv->toTensor();
  if (!t.defined() || t.scalar_type() != at::kFloat || !t.device().is_cpu()) return std::nullopt;
  return t;
}

/// True when argument `name` is absent or a constant None.
bool none_or_absent(const jit::Node* node, const char* name) {
  const jit::Value* v = arg(node, name);
  if (!v) return true;
  auto iv = jit::toIValue(v);
  return iv && iv->isNone();
}

std::optional<bool> constant_bool(const jit::Node* node, const char* name) {
  const jit::Value* v = arg(node, name);
  if (!v) return std::nullopt;
  auto iv = jit::toIValue(v);
  if (!iv || !iv->isBool()) return std::nullopt;
  return iv->toBool();
}

std::optional<double> number(const jit::Node* node, const char* name) {
  return constant_number(arg(node, name));
}

/// A constant int list with `n` entries (a single entry repeated, as PyTorch expands it).
std::optional<std::vector<int64_t>> ints(const jit::Node* node, const char* name, size_t n) {
  const jit::Value* v = arg(node, name);
  if (!v) return std::nullopt;
  auto list = constant_ints(v);
  if (!list) return std::nullopt;
  if (list->size() == 1) list->resize(n, list->front());
  if (list->size() != n) return std::nullopt;
  return list;
}

bool float_input(const graph::SummaryGraph& graph, int op, size_t rank) {
  const auto& o = graph.op(op);
  if (o.inputs.empty()) return false;
  const auto& v = graph.values().at(o.inputs[0]);
  return v.shape.size() == rank && (v.dtype.empty() || v.dtype == "Float");
}

std::optional<LayerForm> linear_form(const jit::Node* node) {
  LayerForm f;
  f.kind = LayerForm::Kind::kLinear;
  auto w = constant_tensor(node, "weight");
  if (!w || w->dim() != 2) return std::nullopt;
  f.weight = *w;
  if (auto b = constant_tensor(node, "bias"))
    f.bias = *b;
  else if (!none_or_absent(node, "bias"))
    return std::nullopt;
  return f;
}

/// aten::addmm(bias, x, weight.t()) with beta = alpha = 1: how LibTorch's Linear traces.
std::optional<LayerForm> addmm_form(const jit::Node* node) {
  const jit::Value* mat2 = arg(node, "mat2");
  if (!mat2 || mat2->node()->kind() != c10::aten::t || number(node, "beta").value_or(0) != 1 ||
      number(node, "alpha").value_or(0) != 1)
    return std::nullopt;
  const jit::Node* t = mat2->node();
  if (t->input(0)->node()->kind() != c10::prim::Constant) return std::nullopt;
  auto w = jit::toIValue(t->input(0));
  auto b = constant_tensor(node, "self");
  if (!w || !w->isTensor() || !b) return std::nullopt;
  LayerForm f;
  f.kind = LayerForm::Kind::kLinear;
  f.weight = w->toTensor();
  if (f.weight.dim() != 2 || f.weight.scalar_type() != at::kFloat || b->dim() != 1 ||
      b->size(0) != f.weight.size(0))
    return std::nullopt;
  f.bias = *b;
  f.input = arg(node, "mat1");
  return f;
}

}  // namespace

std::optional<LayerForm> layer_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  const jit::Node* node = graph.jit_node(op);
  if (o.kind == "aten::linear" || o.kind == "aten::addmm") {
    if (!float_input(graph, op, 2)) return std::nullopt;
    auto f = o.kind == "aten::linear" ? linear_form(node) : addmm_form(node);
    if (f && !f->input) f->input = node->input(0);
    return f;
  }
  if (o.op_kind != OpKind::kConv && o.op_kind != OpKind::kConvTranspose) return std::nullopt;
  if (!float_input(graph, op, 4)) return std::nullopt;
  LayerForm f;
  f.input = node->input(0);
  f.kind = o.op_kind == OpKind::kConv ? LayerForm::Kind::kConvolution
                                      : LayerForm::Kind::kTransposedConvolution;
  auto w = constant_tensor(node, "weight");
  if (!w || w->dim() != 4) return std::nullopt;
  f.weight = *w;
  if (auto b = constant_tensor(node, "bias"))
    f.bias = *b;
  else if (!none_or_absent(node, "bias"))
    return std::nullopt;
  auto stride = ints(node, "stride", 2), padding = ints(node, "padding", 2),
       dilation = ints(node, "dilation", 2);
  auto groups = number(node, "groups");
  if (!stride || !padding || !dilation || !groups) return std::nullopt;
  f.stride = *stride;
  f.padding = *padding;
  f.dilation = *dilation;
  f.padding_r = f.padding;
  f.groups = static_cast<int64_t>(*groups);
  f.output_padding = {0, 0};
  if (f.kind == LayerForm::Kind::kTransposedConvolution) {
    auto op_pad = ints(node, "output_padding", 2);
    if (!op_pad) return std::nullopt;
    f.output_padding = *op_pad;
  }
  return f;
}

namespace {

/// The number behind argument `name`: a constant scalar, or a constant float tensor of one element.
std::optional<double> constant_scalar(const jit::Node* node, const char* name) {
  if (auto n = number(node, name)) return n;
  auto t = constant_tensor(node, name);
  if (t && t->numel() == 1) return t->item<double>();
  return std::nullopt;
}

/// A float tensor op of one traced input whose output has the input's shape: an arithmetic op
/// with a constant number (x·6, x + 3, 3 − x, x / 6, as exporters write a hard sigmoid) is the
/// affine map α·x + β, oneDNN's eltwise_linear.
std::optional<EltwiseForm> scalar_affine_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  const jit::Node* node = graph.jit_node(op);
  if (o.inputs.size() != 1 || o.outputs.size() != 1) return std::nullopt;
  const auto& in = graph.values().at(o.inputs[0]);
  const auto& out = graph.values().at(o.outputs[0]);
  if (in.shape.empty() || in.shape != out.shape || (!in.dtype.empty() && in.dtype != "Float") ||
      (!out.dtype.empty() && out.dtype != "Float"))
    return std::nullopt;
  const jit::Value* self = arg(node, "self");
  const bool self_traced = self && self->node()->kind() != c10::prim::Constant;
  const auto c = constant_scalar(node, self_traced ? "other" : "self");
  if (!c) return std::nullopt;
  using A = dnnl::algorithm;
  const auto linear = [](double a, double b) {
    return EltwiseForm{A::eltwise_linear, static_cast<float>(a), static_cast<float>(b)};
  };
  const double alpha = number(node, "alpha").value_or(1);
  if (!none_or_absent(node, "alpha") && !number(node, "alpha")) return std::nullopt;
  switch (o.op_kind) {
    case OpKind::kMul:
      return linear(*c, 0);
    case OpKind::kAdd:  // self + alpha · other
      return self_traced ? linear(1, alpha * *c) : linear(alpha, *c);
    case OpKind::kSub:  // self − alpha · other
      return self_traced ? linear(1, -alpha * *c) : linear(-alpha, *c);
    case OpKind::kDiv:
      if (!self_traced || *c == 0 || !none_or_absent(node, "rounding_mode")) return std::nullopt;
      return linear(1 / *c, 0);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<EltwiseForm> eltwise_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  const jit::Node* node = graph.jit_node(op);
  using A = dnnl::algorithm;
  switch (o.op_kind) {
    case OpKind::kMul:
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kDiv:
      return scalar_affine_form(graph, op);
    case OpKind::kReLU:
      return EltwiseForm{A::eltwise_relu, 0, 0};
    case OpKind::kReLU6: {
      if (o.kind == "aten::relu6") return EltwiseForm{A::eltwise_clip, 0, 6};
      auto lo = number(node, "min_val"), hi = number(node, "max_val");
      if (!lo || !hi) return std::nullopt;
      return EltwiseForm{A::eltwise_clip, static_cast<float>(*lo), static_cast<float>(*hi)};
    }
    case OpKind::kClamp: {
      auto lo = number(node, "min"), hi = number(node, "max");
      if ((!lo && !none_or_absent(node, "min")) || (!hi && !none_or_absent(node, "max")))
        return std::nullopt;
      return EltwiseForm{A::eltwise_clip, lo ? static_cast<float>(*lo) : -FLT_MAX,
                         hi ? static_cast<float>(*hi) : FLT_MAX};
    }
    case OpKind::kLeakyReLU: {
      auto slope = number(node, "negative_slope");
      if (!slope) return std::nullopt;
      return EltwiseForm{A::eltwise_relu, static_cast<float>(*slope), 0};
    }
    case OpKind::kSigmoid:
      return EltwiseForm{A::eltwise_logistic, 0, 0};
    case OpKind::kTanh:
      return EltwiseForm{A::eltwise_tanh, 0, 0};
    case OpKind::kSiLU:
      return EltwiseForm{A::eltwise_swish, 1, 0};
    case OpKind::kHardswish:
      return EltwiseForm{A::eltwise_hardswish, 0, 0};
    case OpKind::kELU: {
      auto alpha = number(node, "alpha"), scale = number(node, "scale"),
           input_scale = number(node, "input_scale");
      if (!alpha || scale.value_or(1) != 1 || input_scale.value_or(1) != 1) return std::nullopt;
      return EltwiseForm{A::eltwise_elu, static_cast<float>(*alpha), 0};
    }
    default:
      return std::nullopt;
  }
}

std::optional<at::Tensor> prelu_form(const graph::SummaryGraph& graph, int op) {
  if (graph.op(op).op_kind != OpKind::kPReLU) return std::nullopt;
  return constant_tensor(graph.jit_node(op), "weight");
}

std::optional<compress::BatchNormParams> batchnorm_form(const graph::SummaryGraph& graph, int op) {
  if (graph.op(op).op_kind != OpKind::kBatchNorm) return std::nullopt;
  const jit::Node* node = graph.jit_node(op);
  auto training = constant_bool(node, "training");
  auto eps = number(node, "eps");
  auto mean = constant_tensor(node, "running_mean"), var = constant_tensor(node, "running_var");
  if (!training || *training || !eps || !mean || !var) return std::nullopt;
  compress::BatchNormParams bn;
  bn.running_mean = *mean;
  bn.running_var = *var;
  bn.eps = *eps;
  if (auto g = constant_tensor(node, "weight"))
    bn.gamma = *g;
  else if (!none_or_absent(node, "weight"))
    return std::nullopt;
  if (auto b = constant_tensor(node, "bias"))
    bn.beta = *b;
  else if (!none_or_absent(node, "bias"))
    return std::nullopt;
  return bn;
}

std::optional<PoolForm> pool_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  const jit::Node* node = graph.jit_node(op);
  if (!float_input(graph, op, 4) || o.outputs.empty()) return std::nullopt;
  const auto& in = graph.shape(o.inputs[0]);
  const auto& out = graph.shape(o.outputs[0]);
  if (out.size() != 4) return std::nullopt;
  PoolForm f;
  if (o.kind == "aten::adaptive_avg_pool2d") {
    if (in[2] % out[2] || in[3] % out[3]) return std::nullopt;
    f.algorithm = dnnl::algorithm::pooling_avg_exclude_padding;
    f.kernel = f.stride = {in[2] / out[2], in[3] / out[3]};
    f.padding_l = f.padding_r = {0, 0};
    return f;
  }
  auto kernel = ints(node, "kernel_size", 2), padding = ints(node, "padding", 2);
  if (!kernel || !padding) return std::nullopt;
  // An empty stride list is PyTorch's "same as the kernel".
  auto stride_list = constant_ints(arg(node, "stride"));
  if (!stride_list) return std::nullopt;
  auto stride = stride_list->empty() ? kernel : ints(node, "stride", 2);
  if (!stride) return std::nullopt;
  f.kernel = *kernel;
  f.stride = *stride;
  f.padding_l = *padding;
  if (o.kind == "aten::max_pool2d") {
    auto dilation = ints(node, "dilation", 2);
    if (!dilation || (*dilation)[0] != 1 || (*dilation)[1] != 1) return std::nullopt;
    f.algorithm = dnnl::algorithm::pooling_max;
  } else if (o.kind == "aten::avg_pool2d") {
    auto ceil = constant_bool(node, "ceil_mode");
    auto include = constant_bool(node, "count_include_pad");
    if (!ceil || *ceil || !include || !none_or_absent(node, "divisor_override"))
      return std::nullopt;
    f.algorithm = *include ? dnnl::algorithm::pooling_avg_include_padding
                           : dnnl::algorithm::pooling_avg_exclude_padding;
  } else {
    return std::nullopt;
  }
  for (int d = 0; d < 2; ++d)
    f.padding_r.push_back((out[2 + d] - 1) * f.stride[d] + f.kernel[d] - in[2 + d] -
                          f.padding_l[d]);
  return f;
}

std::optional<std::pair<int, int>> add_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  if (o.op_kind != OpKind::kAdd || o.inputs.size() != 2) return std::nullopt;
  const jit::Node* node = graph.jit_node(op);
  if (number(node, "alpha").value_or(0) != 1) return std::nullopt;
  // Both operands are tensors of the traced graph (not a scalar or a constant).
  for (const char* name : {"self", "other"}) {
    const jit::Value* v = arg(node, name);
    if (!v || v->node()->kind() == c10::prim::Constant || !v->type()->cast<c10::TensorType>())
      return std::nullopt;
  }
  const auto& a = graph.values().at(o.inputs[0]);
  const auto& b = graph.values().at(o.inputs[1]);
  if (a.shape != b.shape || a.shape.empty() || (!a.dtype.empty() && a.dtype != "Float") ||
      (!b.dtype.empty() && b.dtype != "Float"))
    return std::nullopt;
  return std::make_pair(o.inputs[0], o.inputs[1]);
}

namespace {

/// Whether op `op` (an input's producer, -1 for none) gives values never below 0.
bool non_negative_output(const graph::SummaryGraph& graph, int op) {
  if (op < 0) return false;
  const auto& o = graph.op(op);
  if (o.op_kind == OpKind::kReLU6) {  // ReLU6, or a hardtanh whose lower bound is not negative
    const auto e = eltwise_form(graph, op);
    return e && e->algorithm == dnnl::algorithm::eltwise_clip && e->alpha >= 0;
  }
  return (o.op_kind == OpKind::kReLU && o.kind.rfind("aten::relu", 0) == 0) ||
         (o.op_kind == OpKind::kClamp && o.clamp_min >= 0);
}

int producer_of_input(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  return o.inputs.empty() ? -1 : graph.values().at(o.inputs[0]).producer;
}

}  // namespace

std::optional<QuantForm> quant_form(const graph::SummaryGraph& graph, int op) {
  const auto& o = graph.op(op);
  if (o.op_kind != OpKind::kFakeQuantize || !(o.scale > 0) || o.inputs.empty()) return std::nullopt;
  QuantForm f;
  f.scale = o.scale;
  f.lo = o.quant_min - o.zero_point;
  f.hi = o.quant_max - o.zero_point;
  const int before = producer_of_input(graph, op);
  bool non_negative = non_negative_output(graph, before);
  if (before >= 0 && graph.op(before).op_kind == OpKind::kClamp) {
    const auto& c = graph.op(before);
    const double lo = std::nearbyint(c.clamp_min / o.scale);
    const double hi = std::nearbyint(c.clamp_max / o.scale);
    if (lo >= static_cast<double>(f.lo) && hi <= static_cast<double>(f.hi)) {
      f.lo = static_cast<int64_t>(lo);
      f.hi = static_cast<int64_t>(hi);
      f.clamped = true;
    }
    non_negative = non_negative || non_negative_output(graph, producer_of_input(graph, before));
  }
  if (non_negative) f.lo = std::max<int64_t>(f.lo, 0);
  f.is_unsigned = f.lo >= 0;
  const int64_t type_lo = f.is_unsigned ? 0 : -128, type_hi = f.is_unsigned ? 255 : 127;
  if (f.lo < type_lo || f.hi > type_hi || f.lo > f.hi) return std::nullopt;
  // Saturating to the type is the grid's own clamp.
  if (f.lo == type_lo && f.hi == type_hi) f.clamped = true;
  return f;
}

std::optional<IntegerWeights> integer_weights(const at::Tensor& weight, int64_t bits) {
  if (bits < 1 || bits > 8 || !weight.defined() || weight.dim() < 2) return std::nullopt;
  const auto flat = weight.detach().to(at::kFloat).reshape({weight.size(0), -1});
  const auto amax = flat.abs().amax({1});
  const auto tensor_amax = amax.max().expand_as(amax);
  // The candidates n (the largest integer of the grid): first the two the bits name, then the
  // other grids a quantizer of fewer bits writes (a layer quantized to 7 bits by a schedule whose
  // bits the graph does not record, --int8-weights 7).
  std::vector<int64_t> candidates = {(int64_t{1} << (bits - 1)) - 1, (int64_t{1} << bits) - 1};
  for (int64_t n = 127; n >= 1; n = (n - 1) / 2)
    if (std::find(candidates.begin(), candidates.end(), n) == candidates.end())
      candidates.push_back(n);
  at::Tensor q_best = at::zeros_like(flat), scale_best = at::ones_like(amax);
  auto missing = amax > 0;  // channels without a grid yet (an all-zero channel is any grid's)
  for (const int64_t n : candidates) {
    if (n < 1 || n > 127) continue;
    // Per channel (max |W_c| is the grid's top), then per tensor (max |W| is: a per-tensor
    // range-linear grid, DoReFa's 2·k/(2^bits − 1) − 1 over the whole tensor).
    for (const auto& top : {amax, tensor_amax}) {
      if (!missing.any().item<bool>()) break;
      const auto scale = at::where(top > 0, top / static_cast<double>(n), at::ones_like(top));
      const auto q = flat / scale.unsqueeze(1);
      const auto fits = missing & ((q - q.round()).abs().amax({1}) <= 1e-3);
      q_best = at::where(fits.unsqueeze(1), q.round(), q_best);
      scale_best = at::where(fits, scale, scale_best);
      missing = missing & ~fits;
    }
  }
  if (missing.any().item<bool>()) return std::nullopt;
  return IntegerWeights{q_best.to(at::kChar).reshape(weight.sizes()), scale_best.contiguous()};
}

}  // namespace igb::runtime
