// The plan compiler's single ops (runtime/plan_compiler.h): an op no layer's chain took, as a
// oneDNN primitive of its own on the native tensors of its inputs: pooling (in 8 bits for the
// maximum of 8-bit values), eltwise activations and gates, PReLU, batch norms (with their ReLU),
// sums and products (one operand broadcast) and channel concatenations. A primitive for which
// oneDNN has only its reference kernel is not used: the op runs as LibTorch's.

#include <torch/csrc/jit/ir/ir.h>

#include "core/jit_containers.h"
#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

/// Adds the step of single op `op`: `primitive` from native tensor `src` to a new one of
/// `dst_desc` (with `weights`, when given), which becomes the op's output.
void PlanCompiler::add_unary_step(int op, dnnl::primitive primitive, int src,
                                  const memory::desc& dst_desc, dnnl::memory weights) {
  const int dst = plan_->add_native(dst_desc);
  auto step = std::make_unique<PrimitiveStep>(std::move(primitive), info_of({op}, ""));
  step->use(DNNL_ARG_SRC, src, false);
  if (weights) step->own(DNNL_ARG_WEIGHTS, std::move(weights));
  step->use(DNNL_ARG_DST, dst, true);
  plan_->add_step(std::move(step));
  value(g_.jit_node(op)->output(0)).natives = {dst};
}

bool PlanCompiler::emit_prelu(int op) {
  jit::Node* node = g_.jit_node(op);
  auto slopes = prelu_form(g_, op);
  if (!slopes || !has_native(node->input(0))) return false;
  const int src = f32_native(node->input(0));
  const auto& desc = plan_->natives[src].desc;
  const auto shape = shape_of(node->input(0));
  // One slope per channel, or one broadcast to all.
  memory::dims dims(shape.size(), 1);
  if (slopes->numel() > 1) dims[1] = shape.at(1);
  const Tag tag = dims.size() == 2 ? Tag::ab : Tag::abcd;
  try {
    dnnl::prelu_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, desc, {dims, Type::f32, Tag::any}}, user_scratchpad(),
        plan_->engine);
    plan_->need_scratchpad(pd);
    add_unary_step(op, dnnl::prelu_forward(pd), src, pd.dst_desc(),
                   pack(*slopes, dims, tag, pd.weights_desc(), plan_->engine, plan_->stream));
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool PlanCompiler::emit_pool(int op) {
  jit::Node* node = g_.jit_node(op);
  auto f = pool_form(g_, op);
  const auto in_shape = shape_of(node->input(0)), out_shape = shape_of(node->output(0));
  // A plain input (the plan's, or a LibTorch operator's output) is pooled in its plain layout:
  // LibTorch's pooling of a small tensor costs several times oneDNN's.
  const bool plain = !has_native(node->input(0));
  if (!f || (plain && in_shape.size() != 4)) return false;
  const memory::desc plain_in(dims_of(in_shape), Type::f32, Tag::nchw);
  // The maximum of 8-bit values is taken in 8 bits, on the same grid.
  const ValueInfo& input = value(node->input(0));
  const auto& grid = input.grid;
  const bool int8 = !plain && f->algorithm == dnnl::algorithm::pooling_max && grid &&
                    !input.natives.empty() && is_int8(plan_->natives[input.natives.front()].desc);
  try {
    const int src = plain  ? as_native(node->input(0), plain_in)
                    : int8 ? input.natives.front()
                           : f32_native(node->input(0));
    const auto& src_desc = plan_->natives[src].desc;
    dnnl::pooling_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, f->algorithm, src_desc,
         plain ? memory::desc(dims_of(out_shape), Type::f32, Tag::nchw)
               : any_desc(out_shape, src_desc.data_type()),
         dims_of(f->stride), dims_of(f->kernel), dims_of(f->padding_l), dims_of(f->padding_r)},
        user_scratchpad(), plan_->engine);
    plan_->need_scratchpad(pd);
    add_unary_step(op, dnnl::pooling_forward(pd), src, pd.dst_desc());
    if (int8)
      value(node->output(0)).grid =
          Quantized{grid->scale, grid->type, nullptr, grid->non_negative, grid->hi};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool PlanCompiler::emit_eltwise(int op) {
  jit::Node* node = g_.jit_node(op);
  auto f = eltwise_form(g_, op);
  if (!f) return false;
  // The traced operand (an affine map's constant may come first: 3 − x).
  const jit::Value* x = node->input(0);
  for (const jit::Value* in : node->inputs())
    if (in->node()->kind() != c10::prim::Constant && in->type()->cast<c10::TensorType>()) {
      x = in;
      break;
    }
  if (!has_native(x)) return false;
  const int src = f32_native(x);
  const auto& desc = plan_->natives[src].desc;
  dnnl::eltwise_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, f->algorithm, desc, f->alpha, f->beta},
      user_scratchpad(), plan_->engine);
  if (is_reference(pd)) return false;
  plan_->need_scratchpad(pd);
  add_unary_step(op, dnnl::eltwise_forward(pd), src, pd.dst_desc());
  return true;
}

void PlanCompiler::emit_gate(const Gate& gate) {
  const int src = f32_native(gate.input);
  const auto& desc = plan_->natives[src].desc;
  dnnl::eltwise_forward::primitive_desc pd({dnnl::prop_kind::forward_inference, gate.form.algorithm,
                                            desc, gate.form.alpha, gate.form.beta},
                                           user_scratchpad(), plan_->engine);
  if (is_reference(pd)) {  // the ops as they are
    for (int op : gate.ops)
      if (!emit_single(op)) emit_torch(g_.jit_node(op));
    return;
  }
  plan_->need_scratchpad(pd);
  const int dst = plan_->add_native(pd.dst_desc());
  auto step = std::make_unique<PrimitiveStep>(dnnl::eltwise_forward(pd), info_of(gate.ops, ""));
  step->use(DNNL_ARG_SRC, src, false);
  step->use(DNNL_ARG_DST, dst, true);
  plan_->add_step(std::move(step));
  value(gate.output).natives = {dst};
}

/// A product or sum of two tensors (a residual add no layer took), the second of the first's shape
/// or broadcast along some of its dimensions (a squeeze-excitation's channel weights, N×C×1×1,
/// times its N×C×H×W input): one oneDNN binary in the first operand's layout.
bool PlanCompiler::emit_binary(int op) {
  const auto& o = g_.op(op);
  if ((o.op_kind != OpKind::kMul && o.op_kind != OpKind::kAdd) || o.inputs.size() != 2 ||
      o.outputs.size() != 1)
    return false;
  jit::Node* node = g_.jit_node(op);
  if (o.op_kind == OpKind::kAdd && constant_number(schema_argument(node, "alpha")).value_or(0) != 1)
    return false;
  const jit::Value* a = schema_argument(node, "self");
  const jit::Value* b = schema_argument(node, "other");
  if (!a || !b) return false;
  for (int id : {o.inputs[0], o.inputs[1], o.outputs[0]}) {
    const auto& dtype = g_.values().at(id).dtype;
    if (!dtype.empty() && dtype != "Float") return false;
  }
  const auto out = shape_of(node->output(0));
  // The first operand of the output's shape, one oneDNN holds already when either does.
  if (shape_of(a) != out || (shape_of(b) == out && !has_native(a))) std::swap(a, b);
  const auto small = shape_of(b);
  if (shape_of(a) != out || small.size() != out.size() || out.empty()) return false;
  for (size_t d = 0; d < out.size(); ++d)
    if (small[d] != out[d] && small[d] != 1) return false;
  if (!has_native(a) && !has_native(b)) return false;
  try {
    const int src0 = f32_native(a);
    const memory::desc desc = plan_->natives[src0].desc;
    // The broadcast operand in the first's layout (the one oneDNN's AVX2 kernels take), else plain.
    const memory::desc small_desc =
        small == out ? desc : same_layout(desc, small).value_or(plain_desc(small));
    dnnl::binary::primitive_desc pd(
        {o.op_kind == OpKind::kMul ? dnnl::algorithm::binary_mul : dnnl::algorithm::binary_add,
         desc, small_desc, desc},
        user_scratchpad(), plan_->engine);
    if (is_reference(pd)) return false;
    const int src1 = as_native(b, small_desc);
    plan_->need_scratchpad(pd);
    const int dst = plan_->add_native(desc);
    auto step = std::make_unique<PrimitiveStep>(dnnl::binary(pd), info_of({op}, ""));
    step->use(DNNL_ARG_SRC_0, src0, false);
    step->use(DNNL_ARG_SRC_1, src1, false);
    step->use(DNNL_ARG_DST, dst, true);
    plan_->add_step(std::move(step));
    value(node->output(0)).natives = {dst};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

/// A batch norm no layer's chain took (a pre-activation one, after a concatenation or an add) as
/// oneDNN's batch normalization on the running statistics, with the ReLU after it when that is
/// its only reader.
bool PlanCompiler::emit_batchnorm(int op) {
  auto bn = batchnorm_form(g_, op);
  jit::Node* node = g_.jit_node(op);
  const jit::Value* x = schema_argument(node, "input");
  if (!bn || !x || !has_native(x)) return false;
  const auto shape = shape_of(x);
  if (shape.size() != 4 && shape.size() != 2) return false;
  const int64_t channels = shape[1];
  using Flags = dnnl::normalization_flags;
  auto flags = Flags::use_global_stats | Flags::use_scale | Flags::use_shift;
  const jit::Value* out = node->output(0);
  const int relu = sole_user(out);
  const bool fuse_relu = options_.fuse && relu >= 0 && ours(relu) && !claimed_.count(relu) &&
                         g_.op(relu).op_kind == OpKind::kReLU && eltwise_form(g_, relu) &&
                         eltwise_form(g_, relu)->alpha == 0;
  if (fuse_relu) flags = flags | Flags::fuse_norm_relu;
  try {
    const int src = f32_native(x);
    const memory::desc desc = plan_->natives[src].desc;
    dnnl::batch_normalization_forward::primitive_desc pd(
        {dnnl::prop_kind::forward_inference, desc, static_cast<float>(bn->eps), flags},
        user_scratchpad(), plan_->engine);
    if (is_reference(pd)) return false;
    plan_->need_scratchpad(pd);
    const auto opts = at::TensorOptions().dtype(at::kFloat);
    const at::Tensor gamma = bn->gamma.defined() ? bn->gamma : at::ones({channels}, opts);
    const at::Tensor beta = bn->beta.defined() ? bn->beta : at::zeros({channels}, opts);
    const memory::desc vector({channels}, Type::f32, Tag::x);
    auto& engine = plan_->engine;
    const int dst = plan_->add_native(pd.dst_desc());
    std::vector<int> ops = {op};
    if (fuse_relu) ops.push_back(relu);
    auto step =
        std::make_unique<PrimitiveStep>(dnnl::batch_normalization_forward(pd), info_of(ops, ""));
    step->use(DNNL_ARG_SRC, src, false);
    step->own(DNNL_ARG_MEAN, pack(bn->running_mean.to(at::kFloat), {channels}, Tag::x, vector,
                                  engine, plan_->stream));
    step->own(DNNL_ARG_VARIANCE, pack(bn->running_var.to(at::kFloat), {channels}, Tag::x, vector,
                                      engine, plan_->stream));
    step->own(DNNL_ARG_SCALE,
              pack(gamma.to(at::kFloat), {channels}, Tag::x, vector, engine, plan_->stream));
    step->own(DNNL_ARG_SHIFT,
              pack(beta.to(at::kFloat), {channels}, Tag::x, vector, engine, plan_->stream));
    step->use(DNNL_ARG_DST, dst, true);
    plan_->add_step(std::move(step));
    if (fuse_relu) {  // the batch norm's own output is read by the ReLU alone
      absorbed_.insert(relu);
      value(g_.jit_node(relu)->output(0)).natives = {dst};
    } else {
      value(out).natives = {dst};
    }
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool PlanCompiler::emit_concat(int op) {
  jit::Node* node = g_.jit_node(op);
  const auto out_shape = shape_of(node->output(0));
  const jit::Value* list = node->input(0);
  auto dim = constant_number(schema_argument(node, "dim"));
  if (out_shape.size() != 4 || !dim || (*dim != 1 && *dim != -3) ||
      list->node()->kind() != c10::prim::ListConstruct || !deferred_lists_.count(list->node()))
    return false;
  const auto inputs = list->node()->inputs();
  for (const jit::Value* in : inputs)
    if (!has_native(in)) return false;
  // One layout for all (oneDNN concatenates mixed layouts with its reference kernel only): that
  // of the input with the most channels; the others converted into it.
  const jit::Value* widest = inputs[0];
  for (const jit::Value* in : inputs)
    if (shape_of(in).at(1) > shape_of(widest).at(1)) widest = in;
  const memory::desc like = plan_->natives[f32_native(widest)].desc;
  std::vector<memory::desc> descs;
  for (const jit::Value* in : inputs) {
    auto desc = same_layout(like, shape_of(in));
    if (!desc) desc = plan_->natives[f32_native(in)].desc;
    descs.push_back(*desc);
  }
  try {
    dnnl::concat::primitive_desc pd(1, descs, plan_->engine, user_scratchpad());
    if (is_reference(pd)) return false;
    std::vector<int> srcs;
    for (size_t i = 0; i < inputs.size(); ++i) srcs.push_back(as_native(inputs[i], descs[i]));
    plan_->need_scratchpad(pd);
    const int dst = plan_->add_native(pd.dst_desc());
    auto step = std::make_unique<PrimitiveStep>(dnnl::concat(pd), info_of({op}, ""));
    for (size_t i = 0; i < srcs.size(); ++i)
      step->use(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), srcs[i], false);
    step->use(DNNL_ARG_DST, dst, true);
    plan_->add_step(std::move(step));
    value(node->output(0)).natives = {dst};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace igb::runtime::compiler
