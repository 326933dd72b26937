// The plan compiler's value table (runtime/plan_compiler.h): the slot of each traced value, the
// native tensors holding it, the conversions between its forms (plain, native layouts, float and
// 8-bit) and the grid it lies on.

#include <torch/csrc/jit/ir/ir.h>

#include <stdexcept>

#include "core/jit_containers.h"
#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

memory::desc any_desc(const std::vector<int64_t>& shape, Type type) {
  return {dims_of(shape), type, Tag::any};
}

memory::desc with_type(memory::desc desc, Type type) {
  desc.data.data_type = static_cast<dnnl_data_type_t>(type);
  return desc;
}

bool is_int8(const memory::desc& d) {
  return d.data_type() == Type::u8 || d.data_type() == Type::s8;
}

std::optional<memory::desc> same_layout(const memory::desc& like,
                                        const std::vector<int64_t>& shape) {
  const auto dims = like.dims();
  if (dims.size() != shape.size() || (dims.size() != 4 && dims.size() != 2)) return std::nullopt;
  const std::vector<Tag> tags =
      dims.size() == 2
          ? std::vector<Tag>{Tag::ab, Tag::ba}
          : std::vector<Tag>{Tag::abcd, Tag::acdb, Tag::aBcd8b, Tag::aBcd16b, Tag::aBcd4b};
  for (Tag tag : tags)
    if (memory::desc(dims, like.data_type(), tag) == like)
      return memory::desc(dims_of(shape), like.data_type(), tag);
  return std::nullopt;
}

Quantized held_on(const QuantForm& q, const jit::Value* source) {
  return {q.scale, q.is_unsigned ? Type::u8 : Type::s8, source, q.is_unsigned,
          std::min<int64_t>(q.hi, q.is_unsigned ? 255 : 127)};
}

ValueInfo& PlanCompiler::value(const jit::Value* v) {
  ValueInfo& info = values_[v];
  if (info.slot < 0) info.slot = plan_->add_slot();
  return info;
}

bool PlanCompiler::has_slot(const jit::Value* v) const {
  auto it = values_.find(v);
  return it != values_.end() && it->second.slot >= 0;
}

std::vector<int64_t> PlanCompiler::shape_of(const jit::Value* v) const {
  auto it = values_.find(v);
  if (it != values_.end() && it->second.id) return g_.shape(*it->second.id);
  if (auto t = v->type()->cast<c10::TensorType>())
    if (auto sizes = t->sizes().concrete_sizes()) return *sizes;
  throw std::logic_error("inference plan: no static shape for value %" + v->debugName());
}

std::string PlanCompiler::producer_name(const jit::Value* v) const {
  auto it = op_of_.find(v->node());
  return it != op_of_.end() ? g_.op(it->second).name : std::string("input");
}

/// The native tensor of `v` in layout `desc`, adding the conversion that makes it if needed.
int PlanCompiler::as_native(const jit::Value* v, const memory::desc& desc) {
  ValueInfo& info = value(v);
  for (int n : info.natives)
    if (plan_->natives[n].desc == desc) return n;
  const int n = plan_->add_native(desc);
  copy_into(v, n);
  info.natives.push_back(n);
  return n;
}

/// Adds a step writing `v`'s value into native tensor `dst` (quantizing or dequantizing it when
/// `v` is on an 8-bit grid and one side is float).
void PlanCompiler::copy_into(const jit::Value* v, int dst) {
  const ValueInfo& info = value(v);
  const auto& natives = info.natives;
  // A copy: as_native may add natives, and a reference into the vector would not survive it.
  const memory::desc dst_desc = plan_->natives[dst].desc;
  const auto& q = info.grid;
  if (natives.empty() && q && q->source) {
    quantize_into(v, *q, dst);
    return;
  }
  std::unique_ptr<Step> step;
  if (!natives.empty()) {
    int src = natives.front();
    for (int n : natives)
      if (plan_->natives[n].desc.data_type() == dst_desc.data_type()) src = n;
    const bool from8 = is_int8(plan_->natives[src].desc), to8 = is_int8(dst_desc);
    float scale = 1;
    if (from8 != to8) {
      if (!q) throw std::logic_error("inference plan: value %" + v->debugName() + " has no grid");
      scale = static_cast<float>(from8 ? q->scale : 1.0 / q->scale);
    }
    const dnnl::reorder::primitive_desc pd(plan_->engine, plan_->natives[src].desc, plan_->engine,
                                           dst_desc, reorder_attr(scale));
    plan_->need_scratchpad(pd);
    auto reorder = std::make_unique<PrimitiveStep>(dnnl::reorder(pd), StepInfo{});
    reorder->use(DNNL_ARG_FROM, src, false);
    reorder->use(DNNL_ARG_TO, dst, true);
    step = std::move(reorder);
  } else {
    if (!info.plain) throw std::logic_error("inference plan: value %" + v->debugName() + " unset");
    if (is_int8(dst_desc) && !q)
      throw std::logic_error("inference plan: plain value %" + v->debugName() + " has no grid");
    // A plain tensor on a grid (a LibTorch op's output of grid values) is exact in 8 bits.
    step = std::make_unique<ToNativeStep>(
        *plan_, info.slot, dst, shape_of(v),
        is_int8(dst_desc) ? static_cast<float>(1.0 / q->scale) : 1.0f);
  }
  step->info.name = producer_name(v);
  step->info.kind = "Reorder";
  plan_->add_step(std::move(step));
}

/// Writes fake quantization output `v`, of grid `q`, into `dst`: an 8-bit `dst` straight from
/// the float value it quantizes (one reorder: scale, round, saturate); a float `dst` through an
/// 8-bit tensor of its layout (the value is the grid's, not the float one).
void PlanCompiler::quantize_into(const jit::Value* v, const Quantized& q, int dst) {
  // A copy: as_native may add natives, and a reference into the vector would not survive it.
  const memory::desc dst_desc = plan_->natives[dst].desc;
  if (dst_desc.data_type() != q.type) {
    // Made in the grid's own type first (its saturation is the grid's clamp), then converted:
    // dequantized into float, or copied as it is into the other 8-bit type.
    const int held = as_native(v, with_type(dst_desc, q.type));
    const float scale = is_int8(dst_desc) ? 1.f : static_cast<float>(q.scale);
    auto step = std::make_unique<PrimitiveStep>(
        dnnl::reorder(dnnl::reorder::primitive_desc(plan_->engine, plan_->natives[held].desc,
                                                    plan_->engine, dst_desc, reorder_attr(scale))),
        StepInfo{producer_name(v), "Reorder", {}, true, 0, false, false, false, {}});
    step->use(DNNL_ARG_FROM, held, false);
    step->use(DNNL_ARG_TO, dst, true);
    plan_->add_step(std::move(step));
    return;
  }
  const float inverse = static_cast<float>(1.0 / q.scale);
  std::unique_ptr<Step> step;
  if (has_native(q.source)) {
    const int src = f32_native(q.source);
    auto reorder =
        std::make_unique<PrimitiveStep>(dnnl::reorder(dnnl::reorder::primitive_desc(
                                            plan_->engine, plan_->natives[src].desc, plan_->engine,
                                            dst_desc, reorder_attr(inverse))),
                                        StepInfo{});
    reorder->use(DNNL_ARG_FROM, src, false);
    reorder->use(DNNL_ARG_TO, dst, true);
    step = std::move(reorder);
  } else {
    ensure_plain(q.source);
    step = std::make_unique<ToNativeStep>(*plan_, slot(q.source), dst, shape_of(v), inverse);
  }
  step->info.name = producer_name(v);
  step->info.kind = "Quantize";
  step->info.ops = {producer_name(v)};
  plan_->add_step(std::move(step));
}

/// A float32 native tensor of `v` (dequantizing an 8-bit one, in its layout, when it has no
/// float one).
int PlanCompiler::f32_native(const jit::Value* v) {
  const ValueInfo& info = value(v);
  for (int n : info.natives)
    if (!is_int8(plan_->natives[n].desc)) return n;
  if (info.natives.empty()) {
    // A fake quantization's output not yet made: in the layout of the value it quantizes
    // (a layout change and a type change in one reorder is several times slower).
    const auto& q = info.grid;
    if (q && q->source && has_native(q->source))
      return as_native(v, plan_->natives[f32_native(q->source)].desc);
    return as_native(v, plain_desc(shape_of(v)));
  }
  return as_native(v, with_type(plan_->natives[info.natives.front()].desc, Type::f32));
}

/// Makes `v`'s value available as a plain tensor in its slot.
void PlanCompiler::ensure_plain(const jit::Value* v) {
  ValueInfo& info = value(v);
  if (info.plain) return;
  auto it = deferred_lists_.find(v->node());
  if (it != deferred_lists_.end()) {
    deferred_lists_.erase(it);
    emit_torch(v->node());
    return;
  }
  if (!has_native(v))
    throw std::logic_error("inference plan: value %" + v->debugName() + " is never computed");
  // A float native when there is one, else the 8-bit one dequantized on the way.
  int src = -1;
  for (int n : info.natives)
    if (src < 0 || !is_int8(plan_->natives[n].desc)) src = n;
  if (src < 0) src = as_native(v, with_type(plain_desc(shape_of(v)), info.grid.value().type));
  const bool from8 = is_int8(plan_->natives[src].desc);
  auto step =
      std::make_unique<ToPlainStep>(*plan_, src, info.slot, shape_of(v),
                                    from8 ? static_cast<float>(info.grid.value().scale) : 1.0f);
  step->info.name = producer_name(v);
  plan_->add_step(std::move(step));
  info.plain = true;
}

/// Whether a native tensor of `v` exists or can be made without LibTorch (a fake quantization's
/// output quantized where it is read).
bool PlanCompiler::has_native(const jit::Value* v) {
  const ValueInfo& info = value(v);
  return !info.natives.empty() || (info.grid && info.grid->source);
}

/// The grid of value `v` when it will be held in 8 bits: a fake quantization's output, or a max
/// pooling's of such a value.
std::optional<QuantForm> PlanCompiler::grid_of(const jit::Value* v) const {
  auto it = op_of_.find(v->node());
  if (it == op_of_.end()) return std::nullopt;
  const auto& op = g_.op(it->second);
  if (op.op_kind == OpKind::kFakeQuantize) return quant_form(g_, op.id);
  // The maximum of grid values, and a part of a tensor padded with zeros (ResNet's option-A
  // shortcut), are on the same grid.
  const bool zero_pad = op.op_kind == OpKind::kPad && op.kind == "aten::constant_pad_nd" &&
                        constant_number(schema_argument(v->node(), "value")).value_or(1) == 0;
  if ((op.op_kind == OpKind::kMaxPool && pool_form(g_, op.id)) || op.op_kind == OpKind::kSlice ||
      zero_pad)
    return grid_of(v->node()->input(0));
  return std::nullopt;
}

}  // namespace igb::runtime::compiler
