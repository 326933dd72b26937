// The plan compiler's float32 layers (runtime/plan_compiler.h): a chain's convolution,
// transposed convolution or linear layer as one oneDNN primitive, its BatchNorm folded into the
// weights and the rest of the chain as post-ops, the weights pre-packed in the layout the
// primitive picks; a stride-s transposed convolution as a sub-pixel convolution and a shuffle.

#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/ir.h>

#include "core/conv_transpose.h"
#include "runtime/algorithm_cache.h"
#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

memory pack(const at::Tensor& t, const memory::dims& dims, Tag plain_tag, const memory::desc& desc,
            const dnnl::engine& engine, dnnl::stream& stream) {
  at::Tensor src = t.contiguous();
  const Type type = src.scalar_type() == at::kChar ? Type::s8 : Type::f32;
  memory plain({dims, type, plain_tag}, engine, src.data_ptr());
  memory packed(desc, engine);
  dnnl::reorder(plain, packed).execute(stream, plain, packed);
  stream.wait();
  return packed;
}

namespace {

/// Turns the transposed convolution `f` into its sub-pixel convolution on input `src`.
SubpixelConv to_subpixel(LayerForm& f, const std::vector<int64_t>& src) {
  auto c =
      subpixel_conv(f.weight, f.bias, f.stride[0], f.padding, f.output_padding, src[2], src[3]);
  f.kind = LayerForm::Kind::kConvolution;
  f.weight = c.weight.contiguous();
  f.bias = c.bias.defined() ? c.bias.contiguous() : c.bias;
  f.stride = {1, 1};
  f.padding = {c.pad[2], c.pad[0]};
  f.padding_r = {c.pad[3], c.pad[1]};
  f.output_padding = {0, 0};
  return c;
}

}  // namespace

/// The layer's primitive for `attr`; its destination layout is returned, its source and weight
/// layouts set.
memory::desc PlanCompiler::layer_desc(const LayerForm& f, const std::vector<int64_t>& src,
                                      const std::vector<int64_t>& dst,
                                      const dnnl::primitive_attr& attr, bool plain_dst,
                                      dnnl::primitive& primitive, memory::desc& weights_desc,
                                      memory::desc& src_desc, const LayerTypes& types) {
  const auto& engine = plan_->engine;
  const bool int8 = types.src != Type::f32;
  const bool bias = f.bias.defined();
  const int64_t out = dst[1];
  const memory::desc bias_md = bias ? memory::desc({out}, Type::f32, Tag::x) : memory::desc();
  const memory::desc src_md =
      types.plain_src ? memory::desc(dims_of(src), types.src, src.size() == 2 ? Tag::nc : Tag::nhwc)
                      : any_desc(src, types.src);
  if (f.kind == LayerForm::Kind::kLinear) {
    const memory::desc w_md({out, src[1]}, types.weights, Tag::any);
    dnnl::inner_product_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, src_md, w_md, bias_md, any_desc(dst, types.dst)}, attr,
        engine);
    plan_->need_scratchpad(pd);
    primitive = dnnl::inner_product_forward(pd);
    weights_desc = pd.weights_desc();
    src_desc = pd.src_desc();
    return pd.dst_desc();
  }
  const int64_t in = src[1], g = f.groups, kh = f.weight.size(2), kw = f.weight.size(3);
  const memory::dims w_dims =
      g > 1 ? memory::dims{g, out / g, in / g, kh, kw} : memory::dims{out, in, kh, kw};
  const memory::desc w_md(w_dims, types.weights, Tag::any);
  const memory::dims strides = dims_of(f.stride), pad_l = dims_of(f.padding),
                     dilation = {f.dilation[0] - 1, f.dilation[1] - 1};
  if (f.kind == LayerForm::Kind::kConvolution) {
    const memory::desc dst_md =
        plain_dst ? memory::desc(dims_of(dst), types.dst, Tag::nchw) : any_desc(dst, types.dst);
    auto make = [&](dnnl::algorithm a) {
      return dnnl::convolution_forward::primitive_desc(
          {dnnl::prop_kind::forward_inference, a, src_md, w_md, bias_md, dst_md, strides, dilation,
           pad_l, dims_of(f.padding_r)},
          attr, engine);
    };
    auto pd = make(dnnl::algorithm::convolution_direct);
    if (options_.pick_algorithms && !int8 && f.weight.size(2) == 3 && f.weight.size(3) == 3 &&
        f.stride[0] == 1 && f.stride[1] == 1 && f.dilation[0] == 1 && f.dilation[1] == 1 &&
        f.groups == 1) {
      try {
        auto winograd = make(dnnl::algorithm::convolution_winograd);
        std::string key;
        for (int64_t d : src) key += std::to_string(d) + "x";
        key += std::to_string(dst[1]) + " p" + std::to_string(f.padding[0]) +
               std::to_string(f.padding[1]) + " t" + std::to_string(at::get_num_threads());
        if (winograd_pays(key, [&] { return runs_faster(winograd, pd); })) pd = winograd;
      } catch (const dnnl::error&) {
        // No Winograd kernel for this CPU or shape.
      }
    }
    plan_->need_scratchpad(pd);
    primitive = dnnl::convolution_forward(pd);
    weights_desc = pd.weights_desc();
    src_desc = pd.src_desc();
    return pd.dst_desc();
  }
  const memory::dims pad_r = {f.padding[0] - f.output_padding[0],
                              f.padding[1] - f.output_padding[1]};
  dnnl::deconvolution_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct, any_desc(src),
       w_md, bias_md, any_desc(dst), strides, dilation, pad_l, pad_r},
      attr, engine);
  plan_->need_scratchpad(pd);
  primitive = dnnl::deconvolution_forward(pd);
  weights_desc = pd.weights_desc();
  src_desc = pd.src_desc();
  return pd.dst_desc();
}

void PlanCompiler::emit_chain(const Chain& chain) {
  if (options_.int8 && emit_int8_chain(chain)) return;
  Chain c = chain;
  std::vector<int> after;  // fused quantizations and activations, run as steps of their own
  if (c.quantize >= 0) {
    // In float32 after all (its input was not quantized here: another stage's value).
    after.assign(c.ops.begin() + static_cast<std::ptrdiff_t>(c.float_ops), c.ops.end());
    c.ops.resize(c.float_ops);
    c.post_ops.resize(c.float_post_ops);
    c.output = g_.jit_node(c.ops.back())->output(0);
    c.quantize = -1;
    // In integers into float32 (the residual add's other operand is on a grid of another
    // type), the quantizations after it as steps of their own.
    if (options_.int8 && emit_int8_chain(c)) {
      for (int op : after)
        if (!emit_single(op)) emit_torch(g_.jit_node(op));
      return;
    }
  }
  LayerForm f = *layer_form(g_, c.ops.front());
  if (c.batchnorm >= 0) {
    auto folded = compress::fold_batchnorm(f.weight, f.bias, *batchnorm_form(g_, c.batchnorm),
                                           f.kind == LayerForm::Kind::kTransposedConvolution
                                               ? compress::FoldedLayer::kTransposedConvolution
                                               : compress::FoldedLayer::kConvolution,
                                           f.groups);
    f.weight = folded.weight;
    f.bias = folded.bias;
  }
  const auto src_shape = shape_of(f.input);
  auto dst_shape = shape_of(c.output);
  std::optional<SubpixelConv> subpixel;
  const int64_t subpixel_stride = f.stride.empty() ? 1 : f.stride[0];
  if (subpixel_pays(f)) {
    subpixel = to_subpixel(f, src_shape);
    dst_shape = {src_shape[0], f.weight.size(0),
                 src_shape[2] + f.padding[0] + f.padding_r[0] - f.weight.size(2) + 1,
                 src_shape[3] + f.padding[1] + f.padding_r[1] - f.weight.size(3) + 1};
  }
  dnnl::primitive primitive;
  memory::desc weights_desc, src_desc, dst_desc;
  try {
    if (!f.padding_r.empty() && (f.padding_r[0] < 0 || f.padding_r[1] < 0))
      throw dnnl::error(dnnl_unimplemented, "negative padding");
    dst_desc = layer_desc(f, src_shape, dst_shape, post_ops_of(c), false, primitive, weights_desc,
                          src_desc);
    if (implementation_of(primitive).rfind("ref", 0) == 0)
      throw dnnl::error(dnnl_unimplemented, "only the reference kernel");
  } catch (const dnnl::error&) {
    // No oneDNN kernel for this geometry, or only the reference one (often 100x slower than
    // LibTorch's): every op of the chain runs as LibTorch's operator.
    for (int op : c.ops) emit_torch(g_.jit_node(op));
    for (int op : after)
      if (!emit_single(op)) emit_torch(g_.jit_node(op));
    return;
  }
  const int dst = chain_destination(c, dst_desc);
  auto step = std::make_unique<PrimitiveStep>(std::move(primitive), info_of(c.ops, ""));
  step->use(DNNL_ARG_SRC, as_native(f.input, src_desc), false);
  own_layer_args(*step, c, f, src_shape, dst_shape, weights_desc);
  if (c.skip) step->reads.push_back(dst);
  step->use(DNNL_ARG_DST, dst, true);
  plan_->add_step(std::move(step));
  if (!subpixel) {
    value(c.output).natives = {dst};
    for (int op : after)
      if (!emit_single(op)) emit_torch(g_.jit_node(op));
    return;
  }
  auto shuffle = std::make_unique<SubpixelStep>(
      *plan_, dst, slot(c.output), dst_shape, subpixel_stride,
      std::vector<int64_t>{subpixel->crop_y, subpixel->crop_x, subpixel->out_h, subpixel->out_w});
  shuffle->info = info_of({c.ops.front()}, "PixelShuffle");
  shuffle->info.macs = 0;
  plan_->add_step(std::move(shuffle));
  value(c.output).plain = true;
}

dnnl::primitive_attr PlanCompiler::post_ops_of(const Chain& c) {
  dnnl::post_ops post_ops;
  for (const auto& p : c.post_ops) {
    if (p.kind == PostOp::Kind::kSum) post_ops.append_sum(1.f);
    if (p.kind == PostOp::Kind::kEltwise)
      post_ops.append_eltwise(1.f, p.eltwise.algorithm, p.eltwise.alpha, p.eltwise.beta);
    if (p.kind == PostOp::Kind::kPReLU) post_ops.append_prelu(p.slopes.numel() > 1 ? 2 : 0);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  return user_scratchpad(attr);
}

/// The chain's output tensor: with a residual add, the skip's buffer when the add is the skip's
/// last use and the layouts agree (written in place), else a fresh tensor the skip is copied into
/// first.
int PlanCompiler::chain_destination(const Chain& c, const memory::desc& dst_desc) {
  if (!c.skip) return plan_->add_native(dst_desc);
  const bool last_use = last_use_of(c.skip) == position_.at(g_.jit_node(c.add));
  for (int n : value(c.skip).natives)
    if (last_use && plan_->natives[n].desc == dst_desc) return plan_->add_native(dst_desc, n);
  const int dst = plan_->add_native(dst_desc);
  copy_into(c.skip, dst);
  return dst;
}

/// The weights, bias and PReLU slopes of a layer step, packed in the layouts its primitive wants.
void PlanCompiler::own_layer_args(PrimitiveStep& step, const Chain& c, const LayerForm& f,
                                  const std::vector<int64_t>& src_shape,
                                  const std::vector<int64_t>& dst_shape,
                                  const memory::desc& weights_desc) {
  auto& engine = plan_->engine;
  const int64_t out = dst_shape[1], g = f.groups;
  memory::dims w_dims;
  Tag w_tag = Tag::oi;
  if (f.kind == LayerForm::Kind::kLinear) {
    w_dims = {out, src_shape[1]};
  } else {
    const int64_t in = src_shape[1], kh = f.weight.size(2), kw = f.weight.size(3);
    const bool transposed = f.kind == LayerForm::Kind::kTransposedConvolution;
    w_dims = g > 1 ? memory::dims{g, out / g, in / g, kh, kw} : memory::dims{out, in, kh, kw};
    w_tag = g > 1 ? (transposed ? Tag::giohw : Tag::goihw) : (transposed ? Tag::iohw : Tag::oihw);
  }
  step.own(DNNL_ARG_WEIGHTS, pack(f.weight, w_dims, w_tag, weights_desc, engine, plan_->stream));
  if (f.bias.defined())
    step.own(DNNL_ARG_BIAS,
             pack(f.bias, {out}, Tag::x, {{out}, Type::f32, Tag::x}, engine, plan_->stream));
  for (size_t i = 0; i < c.post_ops.size(); ++i) {
    if (c.post_ops[i].kind != PostOp::Kind::kPReLU) continue;
    const auto& slopes = c.post_ops[i].slopes;
    // One slope per output channel (mask bit 1), or one for all; laid out like the output.
    memory::dims dims(dst_shape.size(), 1);
    if (slopes.numel() > 1) dims[1] = out;
    const Tag tag = dims.size() == 2 ? Tag::ab : Tag::abcd;
    step.own(DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_WEIGHTS,
             pack(slopes, dims, tag, {dims, Type::f32, tag}, engine, plan_->stream));
  }
}

}  // namespace igb::runtime::compiler
