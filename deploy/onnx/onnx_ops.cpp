#include "deploy/onnx/onnx_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "deploy/onnx/onnx_writer.h"
#include "graph/op_table.h"

namespace igb::deploy {

namespace {

using A = OnnxAttr;
using graph::op_spelling;
using graph::OpSpelling;

const char* onnx_type(const OpNode& op) { return onnx_mapping(op.op_kind).op; }

/// A per-dimension list given once for every spatial dimension ("padding=1" on a 2-D conv).
Shape per_dim(Shape v, size_t dims, int64_t fill) {
  if (v.empty()) v.push_back(fill);
  if (v.size() == 1 && dims > 1) v.assign(dims, v[0]);
  return v;
}

/// PyTorch's symmetric padding as ONNX pads: all begins, then all ends.
Shape onnx_pads(const Shape& padding) {
  Shape pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

std::string require_param(OnnxWriter& w, const OpNode& op, const char* suffix) {
  const std::string name = op.param(suffix);
  if (name.empty()) w.fail(op, std::string("its ") + suffix + " is not a parameter of the model");
  return w.param(name);
}

/// Operand `index` of the traced node as an ONNX value, or "" when None.
std::string optional_operand(OnnxWriter& w, const OpNode& op, size_t index,
                             const std::string& what) {
  const OnnxOperand o = w.operand(op, index);
  return o.kind == OnnxOperand::Kind::kNone ? "" : w.operand_value(op, o, what);
}

size_t spatial_dims(OnnxWriter& w, const OpNode& op) {
  const size_t rank = w.input_shape(op).size();
  if (rank < 3)
    w.fail(op, "its input " + shape_to_string(w.input_shape(op)) + " has no spatial dims");
  return rank - 2;
}

void emit_convolution(OnnxWriter& w, const OpNode& op, bool transposed) {
  const size_t dims = spatial_dims(w, op);
  const Shape& in = w.input_shape(op);
  const std::string weight_name = op.param("weight");
  if (weight_name.empty()) w.fail(op, "its weight is not a parameter of the model");
  Shape weight;
  for (size_t i = 0; i < op.params.size(); ++i)
    if (op.params[i] == weight_name) weight = op.param_shapes[i];
  // ONNX shape inference does not compare the input's channels with the weight's.
  const int64_t expected = transposed ? weight.at(0) : weight.at(1) * op.groups;
  if (in[1] != expected)
    w.fail(op, "its input has " + std::to_string(in[1]) + " channels but its weight " +
                   shape_to_string(weight) + " with groups=" + std::to_string(op.groups) +
                   " takes " + std::to_string(expected));
  std::vector<std::string> inputs = {w.input(op), w.param(weight_name)};
  if (const std::string bias = w.bias(op); !bias.empty()) inputs.push_back(bias);
  std::vector<A> attrs = {
      A::integers("kernel_shape", Shape(weight.begin() + 2, weight.end())),
      A::integers("strides", per_dim(op.stride, dims, 1)),
      A::integers("pads", onnx_pads(per_dim(op.padding, dims, 0))),
      A::integers("dilations", per_dim(op.dilation, dims, 1)),
      A::integer("group", op.groups),
  };
  if (transposed) {
    const Shape out_pad = per_dim(w.ints_arg(op, "output_padding").value_or(Shape{}), dims, 0);
    attrs.push_back(A::integers("output_padding", out_pad));
  }
  w.node(transposed ? "ConvTranspose" : "Conv", op.name, inputs, {w.output(op)}, attrs);
}

/// Kernel, stride and padding of a pooling op, as ONNX attributes.
std::vector<A> pool_attrs(OnnxWriter& w, const OpNode& op) {
  const size_t dims = spatial_dims(w, op);
  const Shape kernel = per_dim(op.kernel, dims, 1);
  Shape stride = op.stride.empty() ? kernel : per_dim(op.stride, dims, 1);
  return {A::integers("kernel_shape", kernel), A::integers("strides", stride),
          A::integers("pads", onnx_pads(per_dim(op.padding, dims, 0))),
          A::integer("ceil_mode", w.bool_arg(op, "ceil_mode").value_or(false) ? 1 : 0)};
}

}  // namespace

void emit_conv(OnnxWriter& w, const OpNode& op) { emit_convolution(w, op, false); }
void emit_conv_transpose(OnnxWriter& w, const OpNode& op) { emit_convolution(w, op, true); }

void emit_linear(OnnxWriter& w, const OpNode& op) {
  if (w.input_shape(op).size() != 2)
    w.fail(op, "Gemm takes a 2-D input, not " + shape_to_string(w.input_shape(op)) +
                   " (flatten before the linear layer)");
  if (op_spelling(op.kind) == OpSpelling::kAddmm &&
      (w.number_arg(op, "beta").value_or(1) != 1 || w.number_arg(op, "alpha").value_or(1) != 1))
    w.fail(op, "addmm with beta or alpha other than 1");
  std::vector<std::string> inputs = {w.input(op), require_param(w, op, "weight")};
  if (const std::string bias = w.bias(op); !bias.empty()) inputs.push_back(bias);
  w.node("Gemm", op.name, inputs, {w.output(op)},
         {A::real("alpha", 1.0f), A::real("beta", 1.0f), A::integer("transB", 1)});
}

void emit_matmul(OnnxWriter& w, const OpNode& op) {
  w.node("MatMul", op.name,
         {w.operand_value(op, w.operand(op, 0), "a"), w.operand_value(op, w.operand(op, 1), "b")},
         {w.output(op)});
}

void emit_batch_norm(OnnxWriter& w, const OpNode& op) {
  const int64_t c = w.input_shape(op).at(1);
  std::string scale = optional_operand(w, op, 1, "weight");
  std::string bias = optional_operand(w, op, 2, "bias");
  const std::string mean = optional_operand(w, op, 3, "running_mean");
  const std::string var = optional_operand(w, op, 4, "running_var");
  if (mean.empty() || var.empty())
    w.fail(op, "it has no running statistics (track_running_stats=false)");
  if (scale.empty()) scale = w.float_vector(op.name + ".scale", std::vector<float>(c, 1.0f));
  if (bias.empty()) bias = w.float_vector(op.name + ".shift", std::vector<float>(c, 0.0f));
  const double eps = w.number_arg(op, "eps").value_or(1e-5);
  w.node("BatchNormalization", op.name, {w.input(op), scale, bias, mean, var}, {w.output(op)},
         {A::real("epsilon", static_cast<float>(eps))});
}

void emit_instance_norm(OnnxWriter& w, const OpNode& op) {
  if (!w.bool_arg(op, "use_input_stats").value_or(true)) return emit_batch_norm(w, op);
  const int64_t c = w.input_shape(op).at(1);
  std::string scale = optional_operand(w, op, 1, "weight");
  std::string bias = optional_operand(w, op, 2, "bias");
  if (scale.empty()) scale = w.float_vector(op.name + ".scale", std::vector<float>(c, 1.0f));
  if (bias.empty()) bias = w.float_vector(op.name + ".shift", std::vector<float>(c, 0.0f));
  const double eps = w.number_arg(op, "eps").value_or(1e-5);
  w.node("InstanceNormalization", op.name, {w.input(op), scale, bias}, {w.output(op)},
         {A::real("epsilon", static_cast<float>(eps))});
}

void emit_unary(OnnxWriter& w, const OpNode& op) {
  w.node(onnx_type(op), op.name, {w.input(op)}, {w.output(op)});
}

void emit_clip(OnnxWriter& w, const OpNode& op) {
  double lo = op.clamp_min, hi = op.clamp_max;
  if (op_spelling(op.kind) == OpSpelling::kRelu6) {
    lo = 0;
    hi = 6;
  } else if (op.op_kind == OpKind::kReLU6) {
    lo = w.number_arg(op, "min_val").value_or(-1);
    hi = w.number_arg(op, "max_val").value_or(1);
  } else if (w.operand(op, 1).kind == OnnxOperand::Kind::kTensor ||
             w.operand(op, 2).kind == OnnxOperand::Kind::kTensor) {
    w.fail(op, "clamp with tensor bounds");
  }
  std::vector<std::string> inputs = {w.input(op)};
  inputs.push_back(std::isinf(lo) ? "" : w.float_scalar(op.name + ".min", static_cast<float>(lo)));
  if (!std::isinf(hi)) inputs.push_back(w.float_scalar(op.name + ".max", static_cast<float>(hi)));
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  w.node("Clip", op.name, inputs, {w.output(op)});
}

void emit_prelu(OnnxWriter& w, const OpNode& op) {
  const std::string name = op.param("weight");
  const OnnxOperand slope = w.operand(op, 1);
  if (slope.kind != OnnxOperand::Kind::kTensor) w.fail(op, "its slope is not a constant");
  // ONNX broadcasts from the last dim: the per-channel slope becomes [C, 1, 1].
  const auto rank = static_cast<int64_t>(w.input_shape(op).size());
  std::vector<int64_t> shape = {slope.tensor.numel()};
  for (int64_t d = 2; d < rank; ++d) shape.push_back(1);
  const std::string init =
      w.tensor(name.empty() ? op.name + ".weight" : name, slope.tensor.reshape(shape));
  w.node("PRelu", op.name, {w.input(op), init}, {w.output(op)});
}

void emit_leaky_relu(OnnxWriter& w, const OpNode& op) {
  const double slope = w.number_arg(op, "negative_slope").value_or(0.01);
  w.node("LeakyRelu", op.name, {w.input(op)}, {w.output(op)},
         {A::real("alpha", static_cast<float>(slope))});
}

void emit_elu(OnnxWriter& w, const OpNode& op) {
  if (w.number_arg(op, "scale").value_or(1) != 1 ||
      w.number_arg(op, "input_scale").value_or(1) != 1)
    w.fail(op, "ELU with scale or input_scale other than 1 (SELU)");
  const double alpha = w.number_arg(op, "alpha").value_or(1);
  w.node("Elu", op.name, {w.input(op)}, {w.output(op)},
         {A::real("alpha", static_cast<float>(alpha))});
}

void emit_silu(OnnxWriter& w, const OpNode& op) {
  const std::string x = w.input(op), s = w.temp(op, "sigmoid");
  w.node("Sigmoid", op.name + "/sigmoid", {x}, {s});
  w.node("Mul", op.name, {x, s}, {w.output(op)});
}

void emit_hardswish(OnnxWriter& w, const OpNode& op) {
  const std::string x = w.input(op), s = w.temp(op, "hardsigmoid");
  w.node("HardSigmoid", op.name + "/hardsigmoid", {x}, {s},
         {A::real("alpha", 1.0f / 6.0f), A::real("beta", 0.5f)});
  w.node("Mul", op.name, {x, s}, {w.output(op)});
}

void emit_max_pool(OnnxWriter& w, const OpNode& op) {
  auto attrs = pool_attrs(w, op);
  attrs.push_back(A::integers("dilations", per_dim(op.dilation, spatial_dims(w, op), 1)));
  w.node("MaxPool", op.name, {w.input(op)}, {w.output(op)}, attrs);
}

void emit_avg_pool(OnnxWriter& w, const OpNode& op) {
  if (w.has_arg(op, "divisor_override")) w.fail(op, "avg_pool2d with divisor_override");
  auto attrs = pool_attrs(w, op);
  attrs.push_back(
      A::integer("count_include_pad", w.bool_arg(op, "count_include_pad").value_or(true) ? 1 : 0));
  w.node("AveragePool", op.name, {w.input(op)}, {w.output(op)}, attrs);
}

void emit_adaptive_pool(OnnxWriter& w, const OpNode& op) {
  const bool max = op.op_kind == OpKind::kAdaptiveMaxPool;
  if (max && op.outputs.size() > 1 && !w.graph().values().at(op.outputs[1]).consumers.empty())
    w.fail(op, "its indices output is used");
  const Shape& in = w.input_shape(op);
  const size_t dims = spatial_dims(w, op);
  const Shape out = per_dim(op.output_size, dims, 1);
  if (std::all_of(out.begin(), out.end(), [](int64_t d) { return d == 1; })) {
    w.node(max ? "GlobalMaxPool" : "GlobalAveragePool", op.name, {w.input(op)}, {w.output(op)});
    return;
  }
  Shape kernel;
  for (size_t d = 0; d < dims; ++d) {
    if (out[d] <= 0 || in[2 + d] % out[d] != 0)
      w.fail(op, "adaptive pooling of " + shape_to_string(in) + " to " + shape_to_string(out) +
                     " has uneven windows");
    kernel.push_back(in[2 + d] / out[d]);
  }
  if (w.dynamic().hw)
    w.fail(op, "adaptive pooling to " + shape_to_string(out) +
                   " has no fixed kernel when H and W vary; export without --dynamic-hw");
  w.node(max ? "MaxPool" : "AveragePool", op.name, {w.input(op)}, {w.output(op)},
         {A::integers("kernel_shape", kernel), A::integers("strides", kernel)});
}

void emit_arithmetic(OnnxWriter& w, const OpNode& op) {
  if (op.op_kind == OpKind::kDiv && w.string_arg(op, "rounding_mode"))
    w.fail(op, "division with a rounding mode");
  const OnnxOperand a = w.operand(op, 0);
  OnnxOperand b = w.operand(op, 1);
  const double alpha = w.number_arg(op, "alpha").value_or(1);
  std::string bv;
  if (alpha != 1 && b.kind == OnnxOperand::Kind::kNumber) {
    b.number *= alpha;
    bv = w.operand_value(op, b, "other");
  } else if (alpha != 1) {
    const std::string raw = w.operand_value(op, b, "other");
    bv = w.temp(op, "scaled");
    w.node("Mul", op.name + "/alpha", {raw, w.float_scalar(op.name + ".alpha", alpha)}, {bv});
  } else {
    bv = w.operand_value(op, b, "other");
  }
  w.node(onnx_type(op), op.name, {w.operand_value(op, a, "self"), bv}, {w.output(op)});
}

void emit_concat(OnnxWriter& w, const OpNode& op) {
  if (!op.params.empty()) w.fail(op, "it concatenates parameters");
  std::vector<std::string> inputs;
  for (size_t i = 0; i < op.inputs.size(); ++i) inputs.push_back(w.input(op, i));
  w.node("Concat", op.name, inputs, {w.output(op)}, {A::integer("axis", op.dim)});
}

void emit_flatten(OnnxWriter& w, const OpNode& op) {
  const auto rank = static_cast<int64_t>(w.input_shape(op).size());
  const int64_t start = op.dim;
  const int64_t end = op.end_dim < 0 ? op.end_dim + rank : op.end_dim;
  if (start == 1 && end == rank - 1) {
    w.node("Flatten", op.name, {w.input(op)}, {w.output(op)}, {A::integer("axis", 1)});
    return;
  }
  // Reshape: 0 copies a leading dim, -1 takes the merged ones; the dims after them as traced.
  const Shape& in = w.input_shape(op);
  Shape target(static_cast<size_t>(start), 0);
  target.push_back(-1);
  for (int64_t d = end + 1; d < rank; ++d) target.push_back(in[static_cast<size_t>(d)]);
  w.node("Reshape", op.name, {w.input(op), w.int64s(op.name + ".shape", target)}, {w.output(op)});
}

void emit_reshape(OnnxWriter& w, const OpNode& op) {
  const Shape& in = w.input_shape(op);
  const Shape& out = w.output_shape(op);
  Shape target = out;
  const bool keeps_batch = !in.empty() && !out.empty() && in[0] == out[0];
  if (keeps_batch && out.size() == 2) {
    target = {0, -1};  // [N, everything else]: right for any batch and any H and W
  } else if (keeps_batch) {
    target[0] = 0;  // the other dims stay as traced, which fixes H and W
  } else if (w.dynamic().batch) {
    w.fail(op, "it reshapes " + shape_to_string(in) + " to " + shape_to_string(out) +
                   " across the batch dim; export without --dynamic-batch");
  }
  w.node("Reshape", op.name, {w.input(op), w.int64s(op.name + ".shape", target)}, {w.output(op)});
}

void emit_pixel_shuffle(OnnxWriter& w, const OpNode& op) {
  w.node("DepthToSpace", op.name, {w.input(op)}, {w.output(op)},
         {A::integer("blocksize", op.factor), A::text("mode", "CRD")});
}

void emit_pad(OnnxWriter& w, const OpNode& op) {
  const auto rank = static_cast<int64_t>(w.input_shape(op).size());
  if (static_cast<int64_t>(op.pads.size()) > 2 * rank || op.pads.size() % 2)
    w.fail(op, "its pad list has " + std::to_string(op.pads.size()) + " entries for a rank-" +
                   std::to_string(rank) + " input");
  // PyTorch lists (begin, end) from the last dim backwards; ONNX all begins, then all ends.
  Shape begins(static_cast<size_t>(rank), 0), ends(static_cast<size_t>(rank), 0);
  for (size_t k = 0; 2 * k + 1 < op.pads.size(); ++k) {
    begins[static_cast<size_t>(rank) - 1 - k] = op.pads[2 * k];
    ends[static_cast<size_t>(rank) - 1 - k] = op.pads[2 * k + 1];
  }
  begins.insert(begins.end(), ends.begin(), ends.end());
  std::string mode = "constant";
  const OpSpelling spelling = op_spelling(op.kind);
  if (spelling == OpSpelling::kReflectionPad) mode = "reflect";
  if (spelling == OpSpelling::kReplicationPad) mode = "edge";
  if (spelling == OpSpelling::kPadModeString) {
    mode = w.string_arg(op, "mode").value_or("constant");
    if (mode == "replicate") mode = "edge";
    if (mode != "constant" && mode != "reflect" && mode != "edge")
      w.fail(op, "pad mode '" + mode + "' (ONNX has constant, reflect and edge)");
  }
  if (spelling == OpSpelling::kPadModeEnum) {
    // at::padding_mode: reflect, replicate, circular, constant.
    const auto code = static_cast<int64_t>(w.number_arg(op, "mode").value_or(3));
    if (code < 0 || code > 3 || code == 2)
      w.fail(op, "pad mode " + std::to_string(code) + " (ONNX has constant, reflect and edge)");
    mode = code == 0 ? "reflect" : code == 1 ? "edge" : "constant";
  }
  std::vector<std::string> inputs = {w.input(op), w.int64s(op.name + ".pads", begins)};
  if (mode == "constant") {
    const double value = w.number_arg(op, "value").value_or(0);
    if (value != 0) inputs.push_back(w.float_scalar(op.name + ".value", static_cast<float>(value)));
  }
  w.node("Pad", op.name, inputs, {w.output(op)}, {A::text("mode", mode)});
}

void emit_upsample(OnnxWriter& w, const OpNode& op) {
  const Shape& in = w.input_shape(op);
  const Shape& out = w.output_shape(op);
  const size_t dims = spatial_dims(w, op);
  // The scale factors PyTorch was given map coordinates; without them, output over input size.
  std::vector<double> factors = w.doubles_arg(op, "scale_factors").value_or(std::vector<double>{});
  if (factors.empty() && dims == 2 && w.has_arg(op, "scales_h") && w.has_arg(op, "scales_w"))
    factors = {*w.number_arg(op, "scales_h"), *w.number_arg(op, "scales_w")};
  std::vector<float> scales = {1.0f, 1.0f};
  for (size_t d = 0; d < dims; ++d)
    scales.push_back(factors.size() == dims
                         ? static_cast<float>(factors[d])
                         : static_cast<float>(out[2 + d]) / static_cast<float>(in[2 + d]));
  std::vector<A> attrs;
  if (op.kind.find("nearest") != std::string::npos) {
    attrs = {A::text("mode", "nearest"), A::text("coordinate_transformation_mode", "asymmetric"),
             A::text("nearest_mode", "floor")};
  } else {
    const bool corners = w.bool_arg(op, "align_corners").value_or(false);
    const bool cubic = op.kind.find("bicubic") != std::string::npos;
    attrs = {A::text("mode", cubic ? "cubic" : "linear"),
             A::text("coordinate_transformation_mode",
                     corners ? "align_corners" : "pytorch_half_pixel")};
    if (cubic) attrs.push_back(A::real("cubic_coeff_a", -0.75f));
  }
  w.node("Resize", op.name, {w.input(op), "", w.float_vector(op.name + ".scales", scales)},
         {w.output(op)}, attrs);
}

void emit_slice(OnnxWriter& w, const OpNode& op) {
  const int64_t start = static_cast<int64_t>(w.number_arg(op, "start").value_or(0));
  const auto end_arg = w.number_arg(op, "end");
  const int64_t end = end_arg && *end_arg < 9.2e18 ? static_cast<int64_t>(*end_arg)
                                                   : std::numeric_limits<int64_t>::max();
  const int64_t step = static_cast<int64_t>(w.number_arg(op, "step").value_or(1));
  w.node("Slice", op.name,
         {w.input(op), w.int64s(op.name + ".starts", {start}), w.int64s(op.name + ".ends", {end}),
          w.int64s(op.name + ".axes", {op.dim}), w.int64s(op.name + ".steps", {step})},
         {w.output(op)});
}

void emit_pass_through(OnnxWriter& w, const OpNode& op) {
  if (op.op_kind == OpKind::kDropout && w.bool_arg(op, "train").value_or(false))
    w.fail(op, "dropout traced in training mode");
  w.alias(op, 0, 0);
}

void emit_cast(OnnxWriter& w, const OpNode& op) {
  const std::string& from = w.graph().values().at(op.inputs.at(0)).dtype;
  const std::string& to = w.graph().values().at(op.outputs.at(0)).dtype;
  if (from == to) return w.alias(op, 0, 0);
  // TensorProto data types.
  const std::map<std::string, int64_t> types = {{"Float", 1}, {"Int", 6},     {"Long", 7},
                                                {"Half", 10}, {"Double", 11}, {"Bool", 9}};
  auto it = types.find(to);
  if (it == types.end()) w.fail(op, "cast to " + to);
  w.node("Cast", op.name, {w.input(op)}, {w.output(op)}, {A::integer("to", it->second)});
}

void emit_mean(OnnxWriter& w, const OpNode& op) {
  const auto rank = static_cast<int64_t>(w.input_shape(op).size());
  Shape axes = w.ints_arg(op, "dim").value_or(Shape{});
  const bool keep = w.bool_arg(op, "keepdim").value_or(false);
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  for (auto& a : axes)
    if (a < 0) a += rank;
  w.node("ReduceMean", op.name, {w.input(op)}, {w.output(op)},
         {A::integers("axes", axes), A::integer("keepdims", keep ? 1 : 0)});
}

void emit_softmax(OnnxWriter& w, const OpNode& op) {
  w.node(onnx_type(op), op.name, {w.input(op)}, {w.output(op)}, {A::integer("axis", op.dim)});
}

const OnnxMapping& onnx_mapping(OpKind kind) {
  static const std::map<OpKind, OnnxMapping> table = {
      {OpKind::kConv, {"Conv", emit_conv}},
      {OpKind::kConvTranspose, {"ConvTranspose", emit_conv_transpose}},
      {OpKind::kLinear, {"Gemm", emit_linear}},
      {OpKind::kMatMul, {"MatMul", emit_matmul}},
      {OpKind::kBatchNorm, {"BatchNormalization", emit_batch_norm}},
      {OpKind::kInstanceNorm, {"InstanceNormalization", emit_instance_norm}},
      {OpKind::kLayerNorm, {"LayerNormalization", nullptr}},
      {OpKind::kReLU, {"Relu", emit_unary}},
      {OpKind::kReLU6, {"Clip", emit_clip}},
      {OpKind::kPReLU, {"PRelu", emit_prelu}},
      {OpKind::kLeakyReLU, {"LeakyRelu", emit_leaky_relu}},
      {OpKind::kTanh, {"Tanh", emit_unary}},
      {OpKind::kSigmoid, {"Sigmoid", emit_unary}},
      // SiLU and Hardswish: Sigmoid or HardSigmoid, then Mul (HardSwish is opset 14).
      {OpKind::kSiLU, {"Sigmoid", emit_silu}},
      {OpKind::kHardswish, {"HardSigmoid", emit_hardswish}},
      {OpKind::kELU, {"Elu", emit_elu}},
      {OpKind::kAbs, {"Abs", emit_unary}},
      {OpKind::kNeg, {"Neg", emit_unary}},
      {OpKind::kExp, {"Exp", emit_unary}},
      {OpKind::kSqrt, {"Sqrt", emit_unary}},
      {OpKind::kMaxPool, {"MaxPool", emit_max_pool}},
      {OpKind::kAvgPool, {"AveragePool", emit_avg_pool}},
      {OpKind::kAdaptiveAvgPool, {"GlobalAveragePool", emit_adaptive_pool}},
      {OpKind::kAdaptiveMaxPool, {"GlobalMaxPool", emit_adaptive_pool}},
      {OpKind::kAdd, {"Add", emit_arithmetic}},
      {OpKind::kSub, {"Sub", emit_arithmetic}},
      {OpKind::kMul, {"Mul", emit_arithmetic}},
      {OpKind::kDiv, {"Div", emit_arithmetic}},
      {OpKind::kConcat, {"Concat", emit_concat}},
      {OpKind::kFlatten, {"Flatten", emit_flatten}},
      {OpKind::kReshape, {"Reshape", emit_reshape}},
      {OpKind::kPixelShuffle, {"DepthToSpace", emit_pixel_shuffle}},
      {OpKind::kPad, {"Pad", emit_pad}},
      {OpKind::kUpsample, {"Resize", emit_upsample}},
      {OpKind::kSlice, {"Slice", emit_slice}},
      {OpKind::kDropout, {"Identity", emit_pass_through}},
      {OpKind::kClamp, {"Clip", emit_clip}},
      {OpKind::kMean, {"ReduceMean", emit_mean}},
      {OpKind::kSoftmax, {"Softmax", emit_softmax}},
      {OpKind::kLogSoftmax, {"LogSoftmax", emit_softmax}},
      {OpKind::kContiguous, {"Identity", emit_pass_through}},
      {OpKind::kClone, {"Identity", emit_pass_through}},
      {OpKind::kCast, {"Cast", emit_cast}},
      // The Q/DQ pass writes a QuantizeLinear + DequantizeLinear pair (OnnxQdqPass); the FP32
      // export has no emitter for it.
      {OpKind::kFakeQuantize, {"QuantizeLinear", nullptr}},
  };
  static const OnnxMapping none;
  const auto it = table.find(kind);
  return it == table.end() ? none : it->second;
}

}  // namespace igb::deploy
