// Element-wise operators, activations, Softmax, Cast, MatMul and Gemm as LibTorch operators.
#include <ATen/Functions.h>

#include <limits>

#include "models/onnx/onnx_ops.h"
#include "models/onnx/onnx_tensor.h"

namespace igb::models::onnx_import {

namespace {

using Tensors = std::vector<at::Tensor>;

/// An op of one input and one output.
template <class F>
OpRun unary(F f) {
  return [f](const Tensors& in) -> Tensors { return {f(in[0])}; };
}

/// An op of two broadcast inputs and one output.
template <class F>
OpRun binary(F f) {
  return [f](const Tensors& in) -> Tensors { return {f(in[0], in[1])}; };
}

/// An op of any number of broadcast inputs, folded left.
template <class F>
OpRun variadic(F f) {
  return [f](const Tensors& in) -> Tensors {
    at::Tensor acc = in[0];
    for (size_t i = 1; i < in.size(); ++i) acc = f(acc, in[i]);
    return {acc};
  };
}

void require_inputs(const NodeView& n, size_t lo, size_t hi) {
  size_t given = 0;
  for (size_t i = 0; i < n.inputs(); ++i) given += n.has_input(i) ? 1 : 0;
  if (!n.has_input(0) || given < lo || n.inputs() > hi)
    n.refuse("takes " + std::to_string(lo) + (hi > lo ? " to " + std::to_string(hi) : "") +
             " inputs, not " + std::to_string(n.inputs()));
}

at::Tensor divide(const at::Tensor& a, const at::Tensor& b) {
  if (at::isIntegralType(a.scalar_type(), true) && at::isIntegralType(b.scalar_type(), true))
    return at::div(a, b, "trunc");
  return at::div(a, b);
}

/// Softmax-like ops: before opset 13 the input is seen as 2-D, [prod(d < axis), prod(d >= axis)].
template <class F>
OpRun softmax_like(const NodeView& n, F f) {
  const bool coerce = n.opset() < 13;
  const int64_t axis = n.i("axis", coerce ? 1 : -1);
  return [coerce, axis, f](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    if (!coerce) return {f(x, a)};
    const auto rows = c10::multiply_integers(x.sizes().begin(), x.sizes().begin() + a);
    return {f(x.reshape({rows, -1}), 1).reshape(x.sizes())};
  };
}

at::Tensor hardmax(const at::Tensor& x, int64_t dim) {
  const auto idx = x.argmax(dim, true);
  return at::zeros_like(x).scatter_(dim, idx, 1);
}

OpRun build_clip(const NodeView& n) {
  if (n.opset() < 11) {
    const double lo = n.f("min", -std::numeric_limits<float>::max());
    const double hi = n.f("max", std::numeric_limits<float>::max());
    return unary([lo, hi](const at::Tensor& x) { return at::clamp(x, lo, hi); });
  }
  return [](const Tensors& in) -> Tensors {
    at::Tensor y = in[0];
    if (in.size() > 1 && in[1].defined()) y = at::clamp_min(y, in[1].reshape({}).item());
    if (in.size() > 2 && in[2].defined()) {
      // As numpy.clip: where min > max, max wins.
      y = at::clamp_max(y, in[2].reshape({}).item());
    }
    return {y};
  };
}

OpRun build_gemm(const NodeView& n) {
  const bool ta = n.i("transA", 0) != 0;
  const bool tb = n.i("transB", 0) != 0;
  const double alpha = n.f("alpha", 1.0f);
  const double beta = n.f("beta", 1.0f);
  return [ta, tb, alpha, beta](const Tensors& in) -> Tensors {
    const auto a = ta ? in[0].t() : in[0];
    const auto b = tb ? in[1].t() : in[1];
    at::Tensor y = at::matmul(a, b);
    if (alpha != 1.0) y = y * alpha;
    if (in.size() > 2 && in[2].defined()) y = beta == 1.0 ? y + in[2] : y + in[2] * beta;
    return {y};
  };
}

OpRun build_prelu(const NodeView& n) {
  // Before opset 7 a 1-D slope of the input's channel count runs along dimension 1.
  const bool channels = n.opset() < 7;
  return binary([channels](const at::Tensor& x, const at::Tensor& slope) {
    if (channels && slope.dim() == 1 && x.dim() > 2 && slope.size(0) == x.size(1)) {
      std::vector<int64_t> shape(x.dim() - 1, 1);
      shape[0] = slope.size(0);
      return at::where(x < 0, x * slope.reshape(shape), x);
    }
    return at::where(x < 0, x * slope, x);
  });
}

/// Cast's `to`: a TensorProto data type, or its name in capitals before opset 6 ("FLOAT").
int32_t cast_target(const NodeView& n) {
  if (n.opset() >= 6) return static_cast<int32_t>(n.i("to", 0));
  std::string name = n.s("to", "");
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int32_t t = 1; t <= 16; ++t)
    if (onnx_type_name(t) == name) return t;
  n.refuse("attribute 'to' is '" + name + "', not a type ONNX defines");
}

OpRun build_cast(const NodeView& n) {
  const auto dtype = torch_dtype(cast_target(n), n.where() + ": attribute 'to'");
  // A cast to the type the tensor has is the tensor itself: no step in the traced graph.
  return unary([dtype](const at::Tensor& x) { return x.scalar_type() == dtype ? x : x.to(dtype); });
}

OpRun build_isinf(const NodeView& n) {
  const bool neg = n.i("detect_negative", 1) != 0;
  const bool pos = n.i("detect_positive", 1) != 0;
  return unary([neg, pos](const at::Tensor& x) {
    return at::logical_or(at::logical_and(at::isposinf(x), at::scalar_tensor(pos)),
                          at::logical_and(at::isneginf(x), at::scalar_tensor(neg)));
  });
}

void add_unary(std::map<std::string, OpBuild>& t) {
  t["Abs"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.abs(); }); };
  t["Neg"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.neg(); }); };
  t["Exp"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.exp(); }); };
  t["Log"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.log(); }); };
  t["Sqrt"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.sqrt(); }); };
  t["Reciprocal"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return x.reciprocal(); });
  };
  t["Floor"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.floor(); }); };
  t["Ceil"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.ceil(); }); };
  t["Round"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.round(); }); };
  t["Sign"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.sign(); }); };
  t["Erf"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.erf(); }); };
  t["Sin"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.sin(); }); };
  t["Cos"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.cos(); }); };
  t["Not"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return x.logical_not(); });
  };
  t["IsNaN"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.isnan(); }); };
  t["IsInf"] = build_isinf;
  t["Identity"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x; }); };
  t["Cast"] = build_cast;
  t["CastLike"] = [](const NodeView&) {
    return binary([](const at::Tensor& x, const at::Tensor& like) {
      return x.scalar_type() == like.scalar_type() ? x : x.to(like.dtype());
    });
  };
}

void add_activations(std::map<std::string, OpBuild>& t) {
  t["Relu"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.relu(); }); };
  t["Sigmoid"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return x.sigmoid(); });
  };
  t["Tanh"] = [](const NodeView&) { return unary([](const at::Tensor& x) { return x.tanh(); }); };
  t["LeakyRelu"] = [](const NodeView& n) {
    const double a = n.f("alpha", 0.01f);
    return unary([a](const at::Tensor& x) { return at::leaky_relu(x, a); });
  };
  t["PRelu"] = build_prelu;
  t["Elu"] = [](const NodeView& n) {
    const double a = n.f("alpha", 1.0f);
    return unary([a](const at::Tensor& x) { return at::elu(x, a); });
  };
  t["Selu"] = [](const NodeView& n) {
    const double a = n.f("alpha", 1.67326319217681884765625f);
    const double g = n.f("gamma", 1.05070102214813232421875f);
    return unary([a, g](const at::Tensor& x) { return at::elu(x, a, g); });
  };
  t["Celu"] = [](const NodeView& n) {
    const double a = n.f("alpha", 1.0f);
    return unary([a](const at::Tensor& x) { return at::celu(x, a); });
  };
  t["ThresholdedRelu"] = [](const NodeView& n) {
    const double a = n.f("alpha", 1.0f);
    return unary([a](const at::Tensor& x) { return at::where(x > a, x, at::zeros_like(x)); });
  };
  t["Softplus"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return at::log1p(x.exp()); });
  };
  t["Softsign"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return x / (x.abs() + 1); });
  };
  t["HardSigmoid"] = [](const NodeView& n) {
    const double a = n.f("alpha", 0.2f);
    const double b = n.f("beta", 0.5f);
    return unary([a, b](const at::Tensor& x) { return at::clamp(x * a + b, 0.0, 1.0); });
  };
  t["HardSwish"] = [](const NodeView&) {
    return unary([](const at::Tensor& x) { return at::hardswish(x); });
  };
  t["Clip"] = build_clip;
  t["Softmax"] = [](const NodeView& n) {
    return softmax_like(n, [](const at::Tensor& x, int64_t d) { return at::softmax(x, d); });
  };
  t["LogSoftmax"] = [](const NodeView& n) {
    return softmax_like(n, [](const at::Tensor& x, int64_t d) { return at::log_softmax(x, d); });
  };
  t["Hardmax"] = [](const NodeView& n) { return softmax_like(n, hardmax); };
}

/// An op of two broadcast inputs. Before opset 7 `broadcast` with `axis` lines B's dimensions up
/// with A's from `axis` on (numpy's rule lines them up at the end).
template <class F>
OpRun broadcast_op(const NodeView& n, F f) {
  require_inputs(n, 2, 2);
  if (!(n.opset() < 7 && n.i("broadcast", 0) != 0 && n.has("axis"))) return binary(f);
  const int64_t axis = n.i("axis", 0);
  return [f, axis](const Tensors& in) -> Tensors {
    const auto& a = in[0];
    const int64_t first = axis < 0 ? axis + a.dim() : axis;
    std::vector<int64_t> shape(a.dim(), 1);
    for (int64_t i = 0; i < in[1].dim(); ++i) shape[first + i] = in[1].size(i);
    return {f(a, in[1].reshape(shape))};
  };
}

at::Tensor power(const at::Tensor& a, const at::Tensor& b) {
  const auto y = at::pow(a, b);
  return y.scalar_type() == a.scalar_type() ? y : y.to(a.scalar_type());
}

void add_binary(std::map<std::string, OpBuild>& t) {
  using T = const at::Tensor&;
  t["Add"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::add(a, b); });
  };
  t["Sub"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::sub(a, b); });
  };
  t["Mul"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::mul(a, b); });
  };
  t["Div"] = [](const NodeView& n) { return broadcast_op(n, divide); };
  t["Pow"] = [](const NodeView& n) { return broadcast_op(n, power); };
  t["Equal"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::eq(a, b); });
  };
  t["Less"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::lt(a, b); });
  };
  t["LessOrEqual"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::le(a, b); });
  };
  t["Greater"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::gt(a, b); });
  };
  t["GreaterOrEqual"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::ge(a, b); });
  };
  t["And"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::logical_and(a, b); });
  };
  t["Or"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::logical_or(a, b); });
  };
  t["Xor"] = [](const NodeView& n) {
    return broadcast_op(n, [](T a, T b) { return at::logical_xor(a, b); });
  };
  t["Where"] = [](const NodeView&) -> OpRun {
    return [](const Tensors& in) -> Tensors { return {at::where(in[0], in[1], in[2])}; };
  };
  t["Max"] = [](const NodeView&) {
    return variadic([](const at::Tensor& a, const at::Tensor& b) { return at::maximum(a, b); });
  };
  t["Min"] = [](const NodeView&) {
    return variadic([](const at::Tensor& a, const at::Tensor& b) { return at::minimum(a, b); });
  };
  t["Sum"] = [](const NodeView&) {
    return variadic([](const at::Tensor& a, const at::Tensor& b) { return at::add(a, b); });
  };
  t["Mean"] = [](const NodeView&) -> OpRun {
    return [](const Tensors& in) -> Tensors {
      at::Tensor acc = in[0];
      for (size_t i = 1; i < in.size(); ++i) acc = at::add(acc, in[i]);
      return {acc / static_cast<double>(in.size())};
    };
  };
  t["MatMul"] = [](const NodeView&) {
    return binary([](const at::Tensor& a, const at::Tensor& b) { return at::matmul(a, b); });
  };
  t["Gemm"] = build_gemm;
}

}  // namespace

void add_elementwise_ops(std::map<std::string, OpBuild>& table) {
  add_unary(table);
  add_activations(table);
  add_binary(table);
}

}  // namespace igb::models::onnx_import
