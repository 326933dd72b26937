#include "deploy/onnx/onnx_qdq_cpu.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "compress/batchnorm_folding.h"
#include "deploy/onnx/onnx_writer.h"
#include "graph/op_table.h"
#include "runtime/int8_grids.h"

namespace igb::deploy {

namespace {

std::vector<float> floats(const at::Tensor& t) {
  const auto c = t.detach().to(at::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

/// Ops whose output holds values of their (first) input: a grid carries through them.
bool carries_grid(const OnnxWriter& w, const OpNode& op) {
  switch (op.op_kind) {
    case OpKind::kMaxPool:
    case OpKind::kSlice:
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kContiguous:
    case OpKind::kClone:
    case OpKind::kDropout:
      return true;
    case OpKind::kPad:
      return op.kind == "aten::constant_pad_nd" && w.number_arg(op, "value").value_or(1) == 0;
    default:
      return false;
  }
}

}  // namespace

OnnxCpuQdqPass::OnnxCpuQdqPass(OnnxWriter& w, const SummaryGraph& graph,
                               const OnnxCalibration* calibration, bool uint8_weights)
    : w_(w), graph_(graph), calibration_(calibration), uint8_weights_(uint8_weights) {}

const OnnxCpuQdqPass::Grid& OnnxCpuQdqPass::quantize(int value, double scale, int zero_point) {
  const std::string x = w_.value_name(value);
  // A value the export aliases to one on this grid already (a dropout's output is its input's
  // name): the same Q/DQ pair.
  for (const auto& [v, g] : grids_)
    if (g.dq == x && g.scale == scale && g.zero_point == zero_point) {
      const Grid same = g;  // the insertion below may move the map's nodes
      return grids_[value] = same;
    }
  const std::string s = w_.float_scalar(x + "/scale", static_cast<float>(scale));
  const std::string z =
      w_.integers(x + "/zero_point", at::full({}, zero_point, at::TensorOptions(at::kByte)));
  w_.node("QuantizeLinear", x + "/quantize", {x, s, z}, {x + "/q"});
  w_.node("DequantizeLinear", x + "/dequantize", {x + "/q", s, z}, {x + "/dq"});
  record_.activation_scales[x] = scale;
  return grids_[value] = Grid{x + "/dq", scale, zero_point};
}

const OnnxCpuQdqPass::Grid* OnnxCpuQdqPass::grid_of(int value) {
  if (auto it = grids_.find(value); it != grids_.end()) return &it->second;
  const int p = graph_.values().at(value).producer;
  if (p < 0 || aliased_.count(p)) return nullptr;
  const OpNode& op = graph_.op(p);
  if (!carries_grid(w_, op) || op.inputs.empty()) return nullptr;
  const Grid* in = grid_of(op.inputs[0]);
  if (!in) return nullptr;
  const Grid carried = *in;  // quantize() may move the map's nodes
  return &quantize(value, carried.scale, carried.zero_point);
}

int OnnxCpuQdqPass::quantization_after(int value) const {
  for (;;) {
    const auto& consumers = graph_.values().at(value).consumers;
    if (consumers.size() != 1) return -1;
    const OpNode& op = graph_.op(consumers[0]);
    if (op.op_kind == OpKind::kFakeQuantize) return op.id;
    if ((op.op_kind != OpKind::kReLU && op.op_kind != OpKind::kClamp) || op.outputs.empty())
      return -1;
    value = op.outputs[0];
  }
}

bool OnnxCpuQdqPass::emit_fake_quantize(const OpNode& op) {
  const auto q = runtime::quant_form(graph_, op.id);
  if (!q)
    w_.fail(op, "its grid [" + std::to_string(op.quant_min) + ", " + std::to_string(op.quant_max) +
                    "] with zero point " + std::to_string(op.zero_point) +
                    " is not an 8-bit grid with zero point 0 (--qdq-placement tensorrt re-grids "
                    "it)");
  if (q->hi < 127)
    w_.fail(op, "its grid ends at " + std::to_string(q->hi) +
                    " steps: the CPU placement writes 8-bit grids, whose clamp the type's "
                    "saturation gives (--qdq-placement tensorrt writes narrower ones)");
  const int zero_point = q->is_unsigned ? 0 : 128;
  if (q->hi < (q->is_unsigned ? 255 : 127) || (!q->is_unsigned && q->lo > -128)) ++dropped_clamps_;
  const std::string out = w_.output(op);
  const std::string s = w_.float_scalar(op.name + "/scale", static_cast<float>(q->scale));
  const std::string z =
      w_.integers(op.name + "/zero_point", at::full({}, zero_point, at::TensorOptions(at::kByte)));
  w_.node("QuantizeLinear", op.name + "/quantize", {w_.input(op), s, z}, {op.name + "/q"});
  w_.node("DequantizeLinear", op.name, {op.name + "/q", s, z}, {out});
  grids_[op.outputs.at(0)] = Grid{out, q->scale, zero_point};
  record_.activation_scales[w_.input(op)] = q->scale;
  record_.quantized_values.push_back({op.name, op.outputs.at(0), out, q->scale});
  return true;
}

bool OnnxCpuQdqPass::emit_layer(const OpNode& op) {
  if (op.inputs.empty()) return false;
  const Grid* in = grid_of(op.inputs[0]);
  const std::string weight_name = op.param("weight");
  const at::Tensor weight = weight_name.empty() ? at::Tensor() : w_.model_tensor(weight_name);
  if (!in || !weight.defined()) return false;
  const auto integer = runtime::integer_weights(weight, op.weight_bits > 0 ? op.weight_bits : 8);
  if (!integer) {
    record_.lines.push_back("layer " + op.name +
                            ": its weights are not on an 8-bit integer grid; written in float, "
                            "onnxruntime runs it in float");
    return false;
  }
  // A BatchNorm after the layer goes into the weights' scales; its sign into the integers.
  const auto& users = graph_.values().at(op.outputs.at(0)).consumers;
  std::optional<compress::BatchNormParams> bn;
  if (users.size() == 1 && graph_.op(users[0]).op_kind == OpKind::kBatchNorm)
    bn = runtime::batchnorm_form(graph_, users[0]);
  const std::string bias_name = op.param("bias");
  const int64_t c = weight.size(0);
  const auto affine = compress::channel_affine(
      bn ? &*bn : nullptr, bias_name.empty() ? at::Tensor() : w_.model_tensor(bias_name), c);
  const auto w_scale = integer->scale.to(at::kDouble) * affine.scale.abs();
  if ((w_scale == 0).any().item<bool>()) return false;
  std::vector<int64_t> view(static_cast<size_t>(weight.dim()), 1);
  view[0] = c;
  const auto sign = at::where(affine.scale < 0, -1.0, 1.0).view(view);
  const auto q = (integer->q.to(at::kDouble) * sign).to(at::kChar);
  const auto sum_scale = w_scale * in->scale;
  const double int32_max = std::numeric_limits<int32_t>::max();
  const auto bias_q = (affine.shift / sum_scale).round().clamp(-int32_max, int32_max).to(at::kInt);
  // The uint8 form holds q + 128 (zero point 128): the same values, in onnxruntime's U8U8
  // kernels. The int8 form's sums are exact without VNNI only when no pair of weights can pass
  // 16 bits against a uint8 input (runtime/int8_pairs.h).
  ++layers_;
  if (!uint8_weights_ && 255 * runtime::largest_pair(q) > 32767)
    pairs_past_16_bits_.push_back(op.name);
  const std::string wq =
      w_.integers(weight_name + "/q", uint8_weights_ ? (q.to(at::kShort) + 128).to(at::kByte) : q);
  const std::string ws = w_.float_vector(weight_name + "/scale", floats(w_scale));
  const std::string wz =
      w_.integers(weight_name + "/zero_point",
                  uint8_weights_ ? at::full({c}, 128, at::kByte) : at::zeros({c}, at::kChar));
  w_.node("DequantizeLinear", weight_name + "/dequantize", {wq, ws, wz}, {weight_name + "/dq"},
          {OnnxAttr::integer("axis", 0)});
  w_.alias_param(weight_name, weight_name + "/dq");
  const std::string b = op.name + ".bias";
  const std::string bq = w_.integers(b + "/q", bias_q);
  const std::string bs = w_.float_vector(b + "/scale", floats(sum_scale));
  const std::string bz = w_.integers(b + "/zero_point", at::zeros({c}, at::kInt));
  w_.node("DequantizeLinear", b + "/dequantize", {bq, bs, bz}, {b + "/dq"},
          {OnnxAttr::integer("axis", 0)});
  w_.set_bias(op.id, b + "/dq");
  w_.override_input(op.id, op.inputs[0], in->dq);
  if (bn) aliased_.insert(users[0]);
  record_.weight_scales[weight_name] = floats(w_scale);
  return false;
}

void OnnxCpuQdqPass::prepare_add(const OpNode& op) {
  if (op.inputs.size() != 2 || op.inputs[0] == op.inputs[1]) return;
  const bool quantized_output = quantization_after(op.outputs.at(0)) >= 0;
  if (!quantized_output && !grid_of(op.inputs[0]) && !grid_of(op.inputs[1])) return;
  for (int v : op.inputs) {
    const Grid* g = grid_of(v);
    if (!g && calibration_)
      if (auto it = calibration_->amax.find(v); it != calibration_->amax.end() && it->second > 0)
        g = &quantize(v, it->second / 127.0, 128);
    if (!g) {
      record_.lines.push_back("residual add " + op.name + ": its operand " + w_.value_name(v) +
                              " has no grid and no calibration range; the add runs in float");
      continue;
    }
    w_.override_input(op.id, v, g->dq);
  }
}

bool OnnxCpuQdqPass::emit(const OpNode& op) {
  switch (op.op_kind) {
    case OpKind::kFakeQuantize:
      return emit_fake_quantize(op);
    case OpKind::kClamp: {
      // The clamp before a fake quantization is the 8-bit type's saturation.
      // It may go when it cuts nothing inside the grid: beyond the grid the type saturates.
      const int fq = quantization_after(op.outputs.at(0));
      const auto q = fq >= 0 ? runtime::quant_form(graph_, fq) : std::nullopt;
      if (!q || graph_.values().at(op.outputs[0]).consumers.at(0) != fq ||
          std::nearbyint(op.clamp_max / q->scale) < static_cast<double>(q->hi) ||
          (!q->is_unsigned &&
           std::nearbyint(op.clamp_min / q->scale) > static_cast<double>(q->lo)) ||
          (q->is_unsigned && op.clamp_min > 0))
        return false;
      aliased_.insert(op.id);
      w_.alias(op, 0, 0);
      return true;
    }
    case OpKind::kBatchNorm:
      if (!aliased_.count(op.id)) return false;
      w_.alias(op, 0, 0);
      return true;
    case OpKind::kConv:
    case OpKind::kLinear:
      return emit_layer(op);
    case OpKind::kAdd:
      prepare_add(op);
      return false;
    default:
      return false;
  }
}

void OnnxCpuQdqPass::finish() {
  if (uint8_weights_ || pairs_past_16_bits_.empty()) {
    record_.exact_on = std::string("every x86 CPU (") +
                       (uint8_weights_ ? "uint8 weights: onnxruntime's U8U8 kernels"
                                       : "int8 weights, no two of a filter past 16 bits") +
                       ")";
  } else {
    std::string names;
    for (size_t i = 0; i < pairs_past_16_bits_.size() && i < 3; ++i)
      names += (i ? ", " : "") + pairs_past_16_bits_[i];
    if (pairs_past_16_bits_.size() > 3)
      names += ", " + std::to_string(pairs_past_16_bits_.size() - 3) + " more";
    record_.exact_on =
        "x86 CPUs with VNNI (AVX-512 VNNI, AMX): on AVX2 and AVX-512 without "
        "VNNI the pairs of products of " +
        std::to_string(pairs_past_16_bits_.size()) + " of " + std::to_string(layers_) +
        " layers (" + names +
        ") could saturate 16 bits (--qdq-cpu avx2 writes uint8 weights, exact "
        "there)";
  }
  if (dropped_clamps_ > 0)
    record_.lines.push_back(
        std::to_string(dropped_clamps_) +
        " fake quantizations clamp inside their 8-bit type (a symmetric grid after a ReLU ends "
        "at 127 steps): written as the type's saturation, so a value beyond the trained range "
        "saturates at the type's end (255 steps) instead");
}

}  // namespace igb::deploy
