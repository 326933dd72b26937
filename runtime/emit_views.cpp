// The plan compiler's views (runtime/plan_compiler.h): a channel shuffle and a slice of a native
// tensor, each one oneDNN reorder between views of two buffers, where LibTorch would run its
// reshapes, transpose and copies on plain tensors with a layout change on each side.

#include <torch/csrc/jit/ir/ir.h>

#include <string>

#include "core/jit_containers.h"
#include "runtime/plan_compiler.h"

namespace igb::runtime::compiler {

namespace {

/// The strides of layout `d` when it has no inner blocks (plain, channels last), else nothing.
std::optional<memory::dims> dense_strides(const memory::desc& d) {
  const auto& data = d.data;
  if (data.format_kind != dnnl_blocked || data.format_desc.blocking.inner_nblks != 0)
    return std::nullopt;
  const auto* strides = data.format_desc.blocking.strides;
  return memory::dims(strides, strides + data.ndims);
}

bool is(const jit::Node* node, const char* kind) {
  return std::string(node->kind().toQualString()) == kind;
}

bool is_reshape(const jit::Node* node) {
  return is(node, "aten::reshape") || is(node, "aten::view") || is(node, "aten::flatten");
}

/// Whether `node` swaps dimensions 1 and 2 of a five-dimensional tensor and nothing else.
bool swaps_channel_axes(const jit::Node* node) {
  if (is(node, "aten::permute")) {
    auto dims = constant_ints(schema_argument(node, "dims"));
    return dims && *dims == std::vector<int64_t>{0, 2, 1, 3, 4};
  }
  if (!is(node, "aten::transpose")) return false;
  auto a = constant_number(schema_argument(node, "dim0"));
  auto b = constant_number(schema_argument(node, "dim1"));
  if (!a || !b) return false;
  const auto d0 = static_cast<int64_t>(*a < 0 ? *a + 5 : *a);
  const auto d1 = static_cast<int64_t>(*b < 0 ? *b + 5 : *b);
  return std::min(d0, d1) == 1 && std::max(d0, d1) == 2;
}

}  // namespace

/// The channel shuffle starting at reshape `op`: N×C×H×W to N×g×C/g×H×W, the two channel axes
/// swapped, (a contiguous copy,) back to N×C×H×W; each op the only reader of the one before.
std::optional<Shuffle> PlanCompiler::shuffle_from(int op) const {
  const jit::Node* first = g_.jit_node(op);
  if (!is(first, "aten::reshape") && !is(first, "aten::view")) return std::nullopt;
  const jit::Value* x = first->input(0);
  const auto in = shape_of(x), mid = shape_of(first->output(0));
  if (in.size() != 4 || mid.size() != 5 || mid[0] != in[0] || mid[1] < 2 ||
      mid[1] * mid[2] != in[1] || mid[3] != in[2] || mid[4] != in[3])
    return std::nullopt;
  Shuffle s;
  s.ops = {op};
  s.groups = mid[1];
  s.input = x;
  const jit::Value* v = first->output(0);
  auto next = [&]() -> const jit::Node* {
    const int user = sole_user(v);
    if (user < 0 || !ours(user) || claimed_.count(user)) return nullptr;
    s.ops.push_back(user);
    v = g_.jit_node(user)->output(0);
    return g_.jit_node(user);
  };
  const jit::Node* node = next();
  if (!node || !swaps_channel_axes(node)) return std::nullopt;
  node = next();
  if (node && is(node, "aten::contiguous")) node = next();
  if (!node || !is_reshape(node) || shape_of(v) != in) return std::nullopt;
  s.output = v;
  return s;
}

void PlanCompiler::plan_shuffles() {
  for (const auto& op : g_.ops()) {
    if (!ours(op.id) || claimed_.count(op.id)) continue;
    auto s = shuffle_from(op.id);
    if (!s) continue;
    claimed_.insert(s->ops.begin(), s->ops.end());
    absorbed_.insert(s->ops.begin(), s->ops.end() - 1);
    shuffle_end_[s->ops.back()] = std::move(*s);
  }
}

/// Output channel j·g + i is input channel i·C/g + j: the input read as N×g×C/g×H×W, written
/// through a view of the output with the strides of the two channel axes exchanged.
bool PlanCompiler::emit_shuffle(const Shuffle& s) {
  if (!has_native(s.input)) return false;
  const auto shape = shape_of(s.input);
  const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3], g = s.groups;
  int src = f32_native(s.input);
  if (!dense_strides(plan_->natives[src].desc))
    src = as_native(s.input, memory::desc(dims_of(shape), Type::f32, Tag::nhwc));
  const memory::desc src_desc = plan_->natives[src].desc;
  const auto a = *dense_strides(src_desc);
  const memory::desc dst_desc = *same_layout(src_desc, shape);
  const auto b = *dense_strides(dst_desc);
  const memory::dims view = {n, g, c / g, h, w};
  const memory::desc from(view, Type::f32, {a[0], (c / g) * a[1], a[1], a[2], a[3]});
  const memory::desc to(view, Type::f32, {b[0], b[1], g * b[1], b[2], b[3]});
  try {
    const dnnl::reorder::primitive_desc pd(plan_->engine, from, plan_->engine, to);
    if (is_reference(pd)) return false;
  } catch (const dnnl::error&) {
    return false;
  }
  const int dst = plan_->add_native(dst_desc);
  plan_->add_step(std::make_unique<ViewReorderStep>(*plan_, src, from, dst, to,
                                                    info_of(s.ops, "ChannelShuffle")));
  value(s.output).natives = {dst};
  return true;
}

/// A slice with step 1 along any dimension: a sub-memory of the input's layout (in a blocked
/// layout, channels from a block's start) copied into the output.
bool PlanCompiler::emit_slice(int op) {
  jit::Node* node = g_.jit_node(op);
  const jit::Value* x = node->input(0);
  if (!has_native(x) || g_.op(op).inputs.size() != 1) return false;
  const auto in = shape_of(x), out = shape_of(node->output(0));
  auto dim = constant_number(schema_argument(node, "dim"));
  auto start = constant_number(schema_argument(node, "start"));
  auto step = constant_number(schema_argument(node, "step"));
  if (!dim || step.value_or(0) != 1 || in.size() != out.size()) return false;
  const auto rank = static_cast<int64_t>(in.size());
  const int64_t d = static_cast<int64_t>(*dim) + (*dim < 0 ? rank : 0);
  if (d < 0 || d >= rank) return false;
  int64_t first = start ? static_cast<int64_t>(*start) : 0;
  if (first < 0) first += in[d];
  first = std::clamp<int64_t>(first, 0, in[d]);
  memory::dims offsets(in.size(), 0);
  offsets[d] = first;
  try {
    const int src = f32_native(x);
    const memory::desc src_desc = plan_->natives[src].desc;
    const memory::desc from = src_desc.submemory_desc(dims_of(out), offsets);
    const memory::desc to = same_layout(src_desc, out).value_or(plain_desc(out));
    const dnnl::reorder::primitive_desc pd(plan_->engine, from, plan_->engine, to);
    if (is_reference(pd)) return false;
    const int dst = plan_->add_native(to);
    plan_->add_step(
        std::make_unique<ViewReorderStep>(*plan_, src, from, dst, to, info_of({op}, "")));
    value(node->output(0)).natives = {dst};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace igb::runtime::compiler
