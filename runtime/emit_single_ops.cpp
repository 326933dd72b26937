// The plan compiler's single ops (runtime/plan_compiler.h): an op no layer's chain took, as a
// oneDNN primitive of its own on the native tensors of its inputs: pooling (in 8 bits for the
// maximum of 8-bit values), eltwise activations, PReLU, adds and channel concatenations.

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
  if (!f || !has_native(node->input(0))) return false;
  const int src = f32_native(node->input(0));
  const auto& desc = plan_->natives[src].desc;
  dnnl::eltwise_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, f->algorithm, desc, f->alpha, f->beta},
      user_scratchpad(), plan_->engine);
  plan_->need_scratchpad(pd);
  add_unary_step(op, dnnl::eltwise_forward(pd), src, pd.dst_desc());
  return true;
}

bool PlanCompiler::emit_add(int op) {
  jit::Node* node = g_.jit_node(op);
  if (!add_form(g_, op)) return false;
  const jit::Value* a = node->input(0);
  const jit::Value* b = node->input(1);
  if (!has_native(a) && !has_native(b)) return false;
  if (!has_native(a)) std::swap(a, b);
  const int src0 = f32_native(a);
  const memory::desc desc = plan_->natives[src0].desc;
  const int src1 = as_native(b, desc);
  dnnl::binary::primitive_desc pd({dnnl::algorithm::binary_add, desc, desc, desc},
                                  user_scratchpad(), plan_->engine);
  plan_->need_scratchpad(pd);
  const int dst = plan_->add_native(desc);
  auto step = std::make_unique<PrimitiveStep>(dnnl::binary(pd), info_of({op}, ""));
  step->use(DNNL_ARG_SRC_0, src0, false);
  step->use(DNNL_ARG_SRC_1, src1, false);
  step->use(DNNL_ARG_DST, dst, true);
  plan_->add_step(std::move(step));
  value(node->output(0)).natives = {dst};
  return true;
}

bool PlanCompiler::emit_concat(int op) {
  jit::Node* node = g_.jit_node(op);
  const auto out_shape = shape_of(node->output(0));
  const jit::Value* list = node->input(0);
  auto dim = constant_number(schema_argument(node, "dim"));
  if (out_shape.size() != 4 || !dim || (*dim != 1 && *dim != -3) ||
      list->node()->kind() != c10::prim::ListConstruct || !deferred_lists_.count(list->node()))
    return false;
  std::vector<memory::desc> descs;
  std::vector<int> srcs;
  for (const jit::Value* in : list->node()->inputs()) {
    if (!has_native(in)) return false;
    srcs.push_back(f32_native(in));
    descs.push_back(plan_->natives[srcs.back()].desc);
  }
  try {
    dnnl::concat::primitive_desc pd(1, descs, plan_->engine, user_scratchpad());
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
