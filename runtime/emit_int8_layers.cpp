// The plan compiler's integer layers (runtime/plan_compiler.h, docs/int8.md): a chain's layer as
// oneDNN's u8/s8 kernel (QNNPACK's is qnnpack_emit.cpp), a fake quantization on its own, and a
// slice or zero padding of a value held in 8 bits.

#include <torch/csrc/jit/ir/ir.h>

#include <cfloat>

#include "core/jit_containers.h"
#include "runtime/int8_pairs.h"
#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

std::vector<PostOp> merged_clamps(const std::vector<PostOp>& post_ops) {
  using dnnl::algorithm;
  std::vector<PostOp> out;
  bool open = false;  // out.back() is a clamp the next ReLU or clamp narrows
  for (const auto& p : post_ops) {
    const bool relu = p.kind == PostOp::Kind::kEltwise &&
                      p.eltwise.algorithm == algorithm::eltwise_relu && p.eltwise.alpha == 0;
    const bool clip =
        p.kind == PostOp::Kind::kEltwise && p.eltwise.algorithm == algorithm::eltwise_clip;
    if (!relu && !clip) {
      out.push_back(p);
      open = false;
      continue;
    }
    const float lo = relu ? 0.f : p.eltwise.alpha, hi = relu ? FLT_MAX : p.eltwise.beta;
    if (!open) {
      out.push_back({PostOp::Kind::kEltwise, EltwiseForm{algorithm::eltwise_clip, lo, hi}, {}});
      open = true;
      continue;
    }
    auto& e = out.back().eltwise;
    e.alpha = std::max(e.alpha, lo);
    e.beta = std::min(e.beta, hi);
  }
  for (auto& p : out)
    if (p.kind == PostOp::Kind::kEltwise && p.eltwise.algorithm == algorithm::eltwise_clip &&
        p.eltwise.alpha == 0 && p.eltwise.beta == FLT_MAX)
      p.eltwise = EltwiseForm{algorithm::eltwise_relu, 0, 0};
  return out;
}

/// The post-ops of an integer layer in units of its output (`grid`: an 8-bit one on grid
/// `out`); false when its residual add's skip is not held in 8 bits of the output's type.
bool PlanCompiler::int8_post_ops(const Chain& c, bool grid, const QuantForm& out, Type dst_type,
                                 dnnl::post_ops& post_ops) {
  for (const auto& p : merged_clamps(c.post_ops)) {
    if (p.kind == PostOp::Kind::kSum) {
      // An 8-bit output adds an 8-bit skip of its type (the values are the skip's integers).
      const auto& skip = value(c.skip).grid;
      // (A never-negative s8 skip is copied into the u8 output as it is.)
      if (grid &&
          (!skip || (skip->type != dst_type && !(dst_type == Type::u8 && skip->non_negative))))
        return false;
      post_ops.append_sum(grid ? static_cast<float>(skip->scale / out.scale) : 1.f);
    } else if (p.eltwise.algorithm == dnnl::algorithm::eltwise_clip) {
      post_ops.append_eltwise(1.f, p.eltwise.algorithm,
                              static_cast<float>(p.eltwise.alpha / out.scale),
                              static_cast<float>(p.eltwise.beta / out.scale));
    } else {
      post_ops.append_eltwise(1.f, p.eltwise.algorithm, p.eltwise.alpha, p.eltwise.beta);
    }
  }
  return true;
}

/// The chain's layer in integers: u8/s8 input, s8 weights, 32-bit sums; per output channel c the
/// sum is scaled by S_in·S_w[c]·k[c] (k: the BatchNorm's γ/σ) and, when the chain ends in a fake
/// quantization, divided by its grid's step (the output is then 8-bit, else float32); the bias
/// (the BatchNorm's shift folded in) is given in units of S_in·S_w[c]·k[c], and the post-ops run
/// in units of the output. False (nothing emitted) when the input is not held in 8 bits here,
/// the weights are not on an integer grid or oneDNN has no kernel.
bool PlanCompiler::emit_int8_chain(const Chain& c) {
  LayerForm f = *layer_form(g_, c.ops.front());
  const auto& in = value(f.input).grid;
  if (!in || c.subpixel || f.kind == LayerForm::Kind::kTransposedConvolution) return false;
  for (const auto& p : c.post_ops)
    if (p.kind == PostOp::Kind::kPReLU) return false;
  const auto weights = layer_grid(c.ops.front(), f.weight);
  if (!weights) return false;
  const auto grid = c.quantize >= 0 ? quant_form(g_, c.quantize) : std::nullopt;
  const QuantForm out = grid ? *grid : QuantForm{1.0, false, -1};
  const int64_t channels = f.weight.size(0);
  const auto bn = c.batchnorm >= 0 ? batchnorm_form(g_, c.batchnorm) : std::nullopt;
  const auto affine = compress::channel_affine(bn ? &*bn : nullptr, f.bias, channels);
  const auto& shift = affine.shift;
  const auto sum_scale = weights->scale.to(at::kDouble) * in->scale * affine.scale;
  if ((sum_scale == 0).any().item<bool>()) return false;
  const Type dst_type = !grid ? Type::f32 : out.is_unsigned ? Type::u8 : Type::s8;
  dnnl::post_ops post_ops;
  if (!int8_post_ops(c, grid.has_value(), out, dst_type, post_ops)) return false;
  if (options_.int8_engine == Int8Engine::kQnnpack && grid &&
      emit_qnnpack(c, f, *weights, affine, *in, out, dst_type))
    return true;
  const auto scales = (sum_scale / out.scale).to(at::kFloat).contiguous();
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  attr.set_output_scales(
      1 << 1, std::vector<float>(scales.data_ptr<float>(), scales.data_ptr<float>() + channels));
  auto src_shape = shape_of(f.input);
  const auto dst_shape = shape_of(c.output);
  // Without VNNI: a never-negative s8 input read as u8 (s8 would halve the weights), and a layer
  // whose pairs of products could saturate run on its input split in two (runtime/int8_pairs.h).
  const auto& isa = int8_isa();
  const bool signed_input = in->type == Type::s8 && !in->non_negative;
  LayerTypes types{isa.pairs_saturate && !signed_input ? Type::u8 : in->type, Type::s8, dst_type};
  const bool depthwise =
      f.kind == LayerForm::Kind::kConvolution && f.groups > 1 && f.weight.size(1) == 1;
  const bool split = !int8_sums_exact(isa, weights->q, signed_input, in->hi, depthwise);
  // Split, a depthwise layer would become a grouped one of two channels a group, which oneDNN
  // runs on a reference path (measured on AVX2: 19 ms for a 0.06 ms layer): it stays float.
  if (split && depthwise) return false;
  f.weight = split ? split_weights(weights->q, f.groups, signed_input) : weights->q;
  f.bias = (shift / sum_scale).to(at::kFloat).contiguous();
  const auto input_shape = src_shape;
  if (split) {
    src_shape[1] *= 2;
    types.src = Type::u8;
    types.plain_src = true;
  }
  dnnl::primitive primitive;
  memory::desc weights_desc, src_desc, dst_desc;
  try {
    dst_desc = layer_desc(f, src_shape, dst_shape, user_scratchpad(attr), false, primitive,
                          weights_desc, src_desc, types);
  } catch (const dnnl::error&) {
    return false;
  }
  const int src = split ? split_input(f.input, *in, input_shape, f.groups, src_desc)
                        : as_native(f.input, src_desc);
  const int dst = chain_destination(c, dst_desc);
  auto step = std::make_unique<PrimitiveStep>(std::move(primitive), info_of(c.ops, ""));
  step->info.int8 = true;
  step->info.int8_split = split;
  step->use(DNNL_ARG_SRC, src, false);
  own_layer_args(*step, c, f, src_shape, dst_shape, weights_desc);
  if (c.skip) step->reads.push_back(dst);
  step->use(DNNL_ARG_DST, dst, true);
  plan_->add_step(std::move(step));
  ValueInfo& written = value(c.output);
  written.natives = {dst};
  if (grid)
    written.grid = Quantized{out.scale, dst_type, nullptr, out.is_unsigned,
                             std::min<int64_t>(out.hi, dst_type == Type::u8 ? 255 : 127)};
  return true;
}

/// The native tensor of `input` (an 8-bit value of shape `shape`) split in two halves of at most
/// 128 per group of channels, of layout `split_desc` (runtime/int8_pairs.h).
int PlanCompiler::split_input(const jit::Value* input, const Quantized& in,
                              const std::vector<int64_t>& shape, int64_t groups,
                              const memory::desc& split_desc) {
  const Tag plain = shape.size() == 2 ? Tag::nc : Tag::nhwc;
  const int whole = as_native(input, memory::desc(dims_of(shape), in.type, plain));
  const int split = plan_->add_native(split_desc);
  int64_t rows = 1;
  for (size_t i = 0; i < shape.size(); ++i) rows *= i == 1 ? 1 : shape[i];
  auto step = std::make_unique<Int8SplitStep>(whole, split, rows, shape[1], groups,
                                              in.type == Type::s8 && !in.non_negative);
  step->info.name = producer_name(input);
  plan_->add_step(std::move(step));
  return split;
}

/// A fake quantization on its own: its output is held in 8 bits from here on, quantized from its
/// input where a reader first asks for it (into the reader's layout, in one reorder).
bool PlanCompiler::emit_quantize(int op) {
  const auto q = quant_form(g_, op);
  if (!q) return false;
  const jit::Node* node = g_.jit_node(op);
  // Saturating to the type must be the grid's clamp: a grid [0, 127] read unclamped after a
  // ReLU saturates as s8.
  Type type = q->is_unsigned ? Type::u8 : Type::s8;
  if (!q->clamped && q->is_unsigned && q->hi == 127)
    type = Type::s8;
  else if (!q->clamped)
    return false;
  value(node->output(0)).grid = Quantized{q->scale, type, node->input(0), q->is_unsigned,
                                          std::min<int64_t>(q->hi, type == Type::u8 ? 255 : 127)};
  return true;
}

/// A slice or a zero padding of channels of a value held in 8 bits (ResNet's option-A shortcut
/// between integer layers), done on its 8-bit NHWC tensor: no dequantizing, no LibTorch.
bool PlanCompiler::emit_int8_view(int op) {
  jit::Node* node = g_.jit_node(op);
  const jit::Value* in = node->input(0);
  const auto& grid = value(in).grid;
  if (!grid || !has_native(in) || !grid_of(node->output(0))) return false;
  const auto in_shape = shape_of(in), out_shape = shape_of(node->output(0));
  if (in_shape.size() != 4) return false;
  Int8ViewStep::View view;
  view.channels = out_shape[1];
  if (g_.op(op).op_kind == OpKind::kSlice) {
    auto dim = constant_number(schema_argument(node, "dim"));
    auto start = constant_number(schema_argument(node, "start"));
    auto step = constant_number(schema_argument(node, "step"));
    if (!dim || !step || *step < 1) return false;
    const int64_t d = *dim < 0 ? static_cast<int64_t>(*dim) + 4 : static_cast<int64_t>(*dim);
    int64_t first = start ? static_cast<int64_t>(*start) : 0;
    if (first < 0) first += in_shape[d];
    if (d < 1 || d > 3 || first < 0 || first >= in_shape[d]) return false;
    view.start[d - 1] = first;
    view.step[d - 1] = static_cast<int64_t>(*step);
  } else {
    const auto& pads = g_.op(op).pads;  // last dimension first
    if (node->kind().toQualString() != std::string("aten::constant_pad_nd") || pads.size() != 6 ||
        pads[0] || pads[1] || pads[2] || pads[3] || pads[4] < 0 || pads[5] < 0)
      return false;
    view.pad_front = pads[4];
    view.channels = in_shape[1];
  }
  auto nhwc = [&](const std::vector<int64_t>& shape) {
    return memory::desc(dims_of(shape), grid->type, Tag::nhwc);
  };
  const int src = as_native(in, nhwc(in_shape));
  const int dst = plan_->add_native(nhwc(out_shape));
  auto step = std::make_unique<Int8ViewStep>(src, dst, in_shape, out_shape, view);
  step->info = info_of({op}, g_.op(op).type);
  step->info.native = true;
  plan_->add_step(std::move(step));
  ValueInfo& written = value(node->output(0));
  written.natives = {dst};
  written.grid = Quantized{grid->scale, grid->type, nullptr, grid->non_negative, grid->hi};
  return true;
}

}  // namespace igb::runtime::compiler
