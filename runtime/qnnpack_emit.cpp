// The plan compiler's QNNPACK layers (runtime/plan_compiler.h): a chain's layer turned into the
// QnnpackLayer that runtime/qnnpack_layer.cpp runs, when InferenceOptions::int8_engine asks for
// LibTorch's QNNPACK kernels.

#include <cfloat>
#include <cmath>

#include "runtime/plan_compiler.h"
#include "runtime/qnnpack_layer.h"

namespace igb::runtime::compiler {

/// The chain's layer on LibTorch's QNNPACK kernels (Int8Engine::kQnnpack): an 8-bit output, a
/// residual add first among the post-ops if any, then only ReLUs and clamps (one integer range
/// with the output type's). False, emitting nothing, when QNNPACK cannot take it.
bool PlanCompiler::emit_qnnpack(const Chain& c, const LayerForm& f, const IntegerWeights& weights,
                                const compress::ChannelAffine& affine, const Quantized& in,
                                const QuantForm& out, Type dst_type) {
  QnnpackLayer l;
  l.lo = dst_type == Type::u8 ? 0 : -128;
  l.hi = dst_type == Type::u8 ? 255 : 127;
  const auto post_ops = merged_clamps(c.post_ops);
  size_t i = 0;
  if (!post_ops.empty() && post_ops[0].kind == PostOp::Kind::kSum) {
    const auto& skip = value(c.skip).grid;
    if (!skip) return false;
    l.sum = true;
    l.skip_scale = skip->scale;
    l.skip_signed = dst_type == Type::s8 && !skip->non_negative;
    i = 1;
  }
  for (; i < post_ops.size(); ++i) {
    const auto& p = post_ops[i];
    if (p.kind != PostOp::Kind::kEltwise) return false;
    if (p.eltwise.algorithm == dnnl::algorithm::eltwise_relu && p.eltwise.alpha == 0) {
      l.lo = std::max<int64_t>(l.lo, 0);
    } else if (p.eltwise.algorithm == dnnl::algorithm::eltwise_clip) {
      // Rounding commutes with a clamp whose bounds are rounded too.
      l.lo = std::max<int64_t>(l.lo, std::llround(p.eltwise.alpha / out.scale));
      if (p.eltwise.beta < FLT_MAX)
        l.hi = std::min<int64_t>(l.hi, std::llround(p.eltwise.beta / out.scale));
    } else {
      return false;
    }
  }
  // Per output channel: the weight step times BatchNorm's factor, its sign moved into the
  // integers (QNNPACK's scales are positive).
  const auto factor = weights.scale.to(at::kDouble) * affine.scale.to(at::kDouble);
  std::vector<int64_t> view(weights.q.dim(), 1);
  view[0] = -1;
  l.weight_q = (weights.q.to(at::kFloat) * factor.sign().to(at::kFloat).view(view)).to(at::kChar);
  l.weight_scale = factor.abs();
  l.bias = affine.shift.to(at::kFloat).contiguous();
  l.stride = f.stride.empty() ? std::vector<int64_t>{1, 1} : f.stride;
  l.padding = f.padding.empty() ? std::vector<int64_t>{0, 0} : f.padding;
  l.dilation = f.dilation.empty() ? std::vector<int64_t>{1, 1} : f.dilation;
  l.groups = f.groups;
  if (f.kind == LayerForm::Kind::kConvolution && f.padding_r != f.padding) return false;
  l.input_shape = shape_of(f.input);
  l.output_shape = shape_of(c.output);
  l.input_scale = in.scale;
  l.input_signed = in.type == Type::s8 && !in.non_negative;
  l.output_scale = out.scale;
  l.output_s8 = dst_type == Type::s8;
  auto nhwc = [](const std::vector<int64_t>& shape, Type type) {
    return memory::desc(dims_of(shape), type, shape.size() == 2 ? Tag::nc : Tag::nhwc);
  };
  const int src = as_native(f.input, nhwc(l.input_shape, in.type));
  const int dst = chain_destination(c, nhwc(l.output_shape, dst_type));
  auto info = info_of(c.ops, "");
  info.native = true;
  info.int8 = info.qnnpack = true;
  plan_->add_step(std::make_unique<QnnpackLayerStep>(std::move(l), src, dst, std::move(info)));
  ValueInfo& written = value(c.output);
  written.natives = {dst};
  written.grid = Quantized{out.scale, dst_type, nullptr, out.is_unsigned,
                           std::min<int64_t>(out.hi, dst_type == Type::u8 ? 255 : 127)};
  return true;
}

}  // namespace igb::runtime::compiler
