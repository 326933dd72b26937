#include "deploy/onnx/onnx_qdq.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "deploy/onnx/onnx_writer.h"
#include "graph/op_table.h"

namespace igb::deploy {

namespace {

namespace jit = torch::jit;

/// Whether `op` ends a residual branch (its output is the computed side of an Add).
bool ends_branch(const OpNode& op) {
  return op.op_kind == OpKind::kConv || op.op_kind == OpKind::kConvTranspose ||
         op.op_kind == OpKind::kLinear || op.op_kind == OpKind::kBatchNorm;
}

bool takes_qdq_input(const OpNode& op) {
  return op.op_kind == OpKind::kConv || op.op_kind == OpKind::kConvTranspose ||
         op.op_kind == OpKind::kLinear;
}

/// The skip input of a residual Add (the side not produced by a conv, linear or batch norm when
/// the other is); -1 when `op` is not such an Add.
int skip_input(const SummaryGraph& g, const OpNode& op) {
  if (op.op_kind != OpKind::kAdd || op.inputs.size() != 2) return -1;
  auto branch = [&](int v) {
    const int p = g.values().at(v).producer;
    return p >= 0 && ends_branch(g.ops().at(p));
  };
  const bool b0 = branch(op.inputs[0]), b1 = branch(op.inputs[1]);
  if (b0 == b1) return -1;
  return b0 ? op.inputs[1] : op.inputs[0];
}

double positive_scale(double s) { return std::isfinite(s) && s > 0 ? s : 1.0; }

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

/// The values calibrate_onnx records: data inputs of Conv/ConvTranspose/Gemm, residual skips.
std::map<int, bool> calibrated_values(const SummaryGraph& g) {
  std::map<int, bool> want;
  for (const auto& op : g.ops()) {
    if (takes_qdq_input(op) && !op.inputs.empty()) want[op.inputs[0]] = true;
    // Both operands of an add: the CPU placement quantizes the branch's too (QLinearAdd).
    if (op.op_kind == OpKind::kAdd && op.inputs.size() == 2)
      for (int v : op.inputs) want[v] = true;
  }
  return want;
}

}  // namespace

OnnxCalibration calibrate_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                               const OnnxBatchSource& batches, const std::string& method,
                               double percentile) {
  if (method != "max" && method != "percentile")
    throw InputError("calibration method '" + method + "': valid methods: max, percentile");
  if (method == "percentile" && !(percentile > 0 && percentile <= 100))
    throw InputError("--percentile " + fmt(percentile) + " must lie in (0, 100]");
  OnnxCalibration c;
  c.method = method;
  c.percentile = percentile;
  const auto want = calibrated_values(graph);
  std::map<int, double> sum;
  const bool was_training = model.is_training();
  model.eval();
  torch::NoGradGuard no_grad;
  auto observe = [&](int id, const at::Tensor& t) {
    if (!want.count(id)) return;
    const auto a = t.detach().abs().flatten().to(at::kFloat);
    double v = 0;
    if (method == "max") {
      v = a.max().item<double>();
      sum[id] = std::max(sum[id], v);
    } else {
      const auto n = a.numel();
      const auto rank = std::clamp<int64_t>(
          static_cast<int64_t>(std::ceil(percentile / 100.0 * static_cast<double>(n))), 1, n);
      v = std::get<0>(a.kthvalue(rank)).item<double>();
      sum[id] += v;
    }
  };
  batches([&](const at::Tensor& x) {
    replay_trace(graph, x, [&](int id, at::Tensor& t) { observe(id, t); });
    ++c.batches;
  });
  if (was_training) model.train();
  if (c.batches == 0) throw InputError("calibration got no batch");
  for (const auto& [id, v] : sum)
    c.amax[id] = method == "max" ? v : v / static_cast<double>(c.batches);
  return c;
}

OnnxQdqPass::OnnxQdqPass(OnnxWriter& w, const SummaryGraph& graph,
                         const OnnxCalibration* calibration)
    : w_(w), graph_(graph), calibration_(calibration) {}

std::string OnnxQdqPass::activation(int value, double scale) {
  if (auto it = dq_.find(value); it != dq_.end()) return it->second.first;
  scale = positive_scale(scale);
  const std::string x = w_.value_name(value);
  const std::string s = w_.float_scalar(x + "/scale", static_cast<float>(scale));
  const std::string z = w_.int8s(x + "/zero_point", {0}, {});
  w_.node("QuantizeLinear", x + "/quantize", {x, s, z}, {x + "/q"});
  w_.node("DequantizeLinear", x + "/dequantize", {x + "/q", s, z}, {x + "/dq"});
  dq_[value] = {x + "/dq", scale};
  record_.activation_scales[x] = scale;
  return x + "/dq";
}

double OnnxQdqPass::grid_scale_of(int value) const {
  for (;;) {
    if (auto it = dq_.find(value); it != dq_.end()) return it->second.second;
    const int p = graph_.values().at(value).producer;
    if (p < 0) return 0;
    const OpNode& op = graph_.ops().at(p);
    switch (op.op_kind) {
      case OpKind::kSlice:
      case OpKind::kPad:
      case OpKind::kReshape:
      case OpKind::kFlatten:
      case OpKind::kContiguous:
      case OpKind::kClone:
      case OpKind::kDropout:
      case OpKind::kMaxPool:
        if (op.inputs.empty()) return 0;
        value = op.inputs[0];
        break;
      default:
        return 0;
    }
  }
}

void OnnxQdqPass::weight(const OpNode& op, bool input_quantized) {
  const std::string name = op.param("weight");
  if (name.empty()) return;
  const at::Tensor wt = w_.model_tensor(name);
  if (!wt.defined() || wt.dim() < 2) return;
  const auto flat = wt.detach().to(at::kCPU, at::kFloat).reshape({wt.size(0), -1});
  const int64_t c = flat.size(0);
  auto amax_scales = [&] {
    return at::where(flat.abs().amax({1}) > 0, flat.abs().amax({1}) / 127.0, at::ones({c}));
  };
  at::Tensor scales;
  if (op.weight_bits > 0) {
    const std::string prefix = name.substr(0, name.size() - 6);  // "<module>."
    at::Tensor s = w_.model_tensor(prefix + "weight_scale");
    std::string why;
    if (!s.defined() || (s.numel() != 1 && s.numel() != c)) {
      why = "it has no weight_scale buffer of " + std::to_string(c) + " or 1 values";
    } else {
      s = s.detach().to(at::kCPU, at::kFloat).flatten().expand({c}).contiguous();
      s = at::where(s > 0, s, at::ones({c}));
      const auto q = flat / s.unsqueeze(1);
      const double off = (q - q.round()).abs().max().item<double>();
      const double qmax = q.round().abs().max().item<double>();
      if (off > 1e-3)
        why = "its " + std::to_string(op.weight_bits) +
              "-bit weights are not integer multiples of weight_scale (an asymmetric grid)";
      else if (qmax > 127)
        why = "its " + std::to_string(op.weight_bits) + "-bit weight grid reaches integer ±" +
              fmt(qmax) + " at scale " + fmt(s.max().item<double>()) + ", beyond int8's ±127";
      else
        scales = s;
    }
    if (!scales.defined() && !input_quantized) {
      // TensorRT runs a layer with a float input in float whatever its weights: the trained
      // values themselves, exact, serve it better than a second rounding onto int8.
      record_.lines.push_back("layer " + op.name + ": " + why +
                              ", and its input stays float: weights written as their quantized "
                              "values in float (exact)");
      return;
    }
    if (!scales.defined()) {
      scales = amax_scales();
      record_.lines.push_back("layer " + op.name + ": " + why +
                              "; written as the nearest symmetric int8 grid, scale max|W|/127 "
                              "per output channel");
    }
  } else if (calibration_) {
    scales = amax_scales();
  } else {
    return;
  }
  std::vector<float> v(static_cast<size_t>(c));
  std::memcpy(v.data(), scales.contiguous().data_ptr<float>(), v.size() * sizeof(float));
  for (auto& x : v) x = static_cast<float>(positive_scale(x));
  const std::string init = w_.param(name);
  const std::string s = w_.float_vector(name + "/scale", v);
  const std::string z = w_.int8s(name + "/zero_point", std::vector<int8_t>(v.size(), 0), {c});
  w_.node("QuantizeLinear", name + "/quantize", {init, s, z}, {name + "/q"},
          {OnnxAttr::integer("axis", 0)});
  w_.node("DequantizeLinear", name + "/dequantize", {name + "/q", s, z}, {name + "/dq"},
          {OnnxAttr::integer("axis", 0)});
  w_.alias_param(name, name + "/dq");
  record_.weight_scales[init] = v;
}

void OnnxQdqPass::before(const OpNode& op) {
  if (takes_qdq_input(op) && !op.inputs.empty()) {
    const int v = op.inputs[0];
    if (!dq_.count(v) && calibration_) {
      if (auto it = calibration_->amax.find(v); it != calibration_->amax.end())
        activation(v, it->second / 127.0);
    }
    const auto it = dq_.find(v);
    if (it != dq_.end())
      w_.override_input(op.id, v, it->second.first);
    else if (op.weight_bits > 0)
      record_.lines.push_back(
          "layer " + op.name +
          ": its input stays float (no fake quantization or calibration range "
          "before it; --calibrate gives it one); TensorRT runs the layer in a float precision");
    weight(op, it != dq_.end());
    return;
  }
  const int skip = skip_input(graph_, op);
  if (skip < 0) return;
  if (!dq_.count(skip)) {
    double s = grid_scale_of(skip);
    if (s <= 0 && calibration_)
      if (auto it = calibration_->amax.find(skip); it != calibration_->amax.end())
        s = it->second / 127.0;
    if (s > 0) {
      activation(skip, s);
    } else {
      if (!dq_.empty())
        record_.lines.push_back("residual add " + op.name +
                                ": its skip input stays float (no fake quantization before it "
                                "and no calibration range)");
      return;
    }
  }
  w_.override_input(op.id, skip, dq_.at(skip).first);
}

void OnnxQdqPass::emit_fake_quantize(const OpNode& op) {
  if (!(op.scale > 0))
    w_.fail(op, "its scale is not a positive constant (per-channel activations are not exported)");
  double scale = op.scale;
  if (op.zero_point != 0 || op.quant_min < -128 || op.quant_max > 127) {
    const double lo = static_cast<double>(op.quant_min - op.zero_point) * op.scale;
    const double hi = static_cast<double>(op.quant_max - op.zero_point) * op.scale;
    scale = positive_scale(std::max(std::abs(lo), std::abs(hi)) / 127.0);
    record_.lines.push_back("layer " + op.name + ": activation grid [" +
                            std::to_string(op.quant_min) + ", " + std::to_string(op.quant_max) +
                            "] with zero point " + std::to_string(op.zero_point) + " and scale " +
                            fmt(op.scale) +
                            " does not fit int8 with zero point 0; written as "
                            "symmetric int8 over [" +
                            fmt(-std::max(std::abs(lo), std::abs(hi))) + ", " +
                            fmt(std::max(std::abs(lo), std::abs(hi))) + "], scale " + fmt(scale));
  }
  const std::string x = w_.input(op);
  const std::string out = w_.output(op);
  const std::string s = w_.float_scalar(op.name + "/scale", static_cast<float>(scale));
  const std::string z = w_.int8s(op.name + "/zero_point", {0}, {});
  w_.node("QuantizeLinear", op.name + "/quantize", {x, s, z}, {op.name + "/q"});
  w_.node("DequantizeLinear", op.name, {op.name + "/q", s, z}, {out});
  dq_[op.outputs.at(0)] = {out, scale};
  record_.activation_scales[x] = scale;
  record_.quantized_values.push_back({op.name, op.outputs.at(0), out, scale});
}

}  // namespace igb::deploy
