#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <cfloat>
#include <chrono>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/conv_transpose.h"
#include "core/error.h"
#include "core/jit_containers.h"
#include "core/table.h"
#include "graph/summary_graph.h"
#include "runtime/algorithm_cache.h"
#include "runtime/int8_pairs.h"
#include "runtime/op_forms.h"
#include "runtime/plan.h"
#include "runtime/qnnpack_layer.h"

namespace igb::runtime {

namespace {

namespace jit = torch::jit;
using dnnl::memory;
using graph::OpKind;
using Tag = memory::format_tag;
using Type = memory::data_type;

constexpr size_t kGraphOutput = std::numeric_limits<size_t>::max();

memory::desc any_desc(const std::vector<int64_t>& shape, Type type = Type::f32) {
  return {dims_of(shape), type, Tag::any};
}

/// `desc` with its values of type `type` (the same layout).
memory::desc with_type(memory::desc desc, Type type) {
  desc.data.data_type = static_cast<dnnl_data_type_t>(type);
  return desc;
}

bool is_int8(const memory::desc& d) {
  return d.data_type() == Type::u8 || d.data_type() == Type::s8;
}

/// The data types of a layer's primitive.
struct LayerTypes {
  Type src = Type::f32, weights = Type::f32, dst = Type::f32;
  /// The source in NHWC (NC) rather than the primitive's choice (a split input's layout).
  bool plain_src = false;
};

/// A oneDNN post-op of a fused layer.
struct PostOp {
  enum class Kind { kEltwise, kSum, kPReLU };
  Kind kind = Kind::kEltwise;
  EltwiseForm eltwise;
  at::Tensor slopes;
};

/// A layer and the ops fused into it, run as one primitive at the position of its last op.
struct Chain {
  std::vector<int> ops;  // the layer first
  int batchnorm = -1;
  std::vector<PostOp> post_ops;
  /// The residual add's other operand, or null.
  const jit::Value* skip = nullptr;
  int add = -1;
  const jit::Value* output = nullptr;
  /// A transposed convolution run in the sub-pixel form.
  bool subpixel = false;
  /// The fake quantization ending the chain when it runs in integers (InferenceOptions::int8),
  /// or -1; the ops and post-ops before the first fused quantization (run in float32 when the
  /// layer cannot run in integers after all).
  int quantize = -1;
  size_t float_ops = 0, float_post_ops = 0;
};

/// A value held on an 8-bit grid: its native tensors of type u8 or s8 hold value / scale.
struct Quantized {
  double scale = 1;
  Type type = Type::u8;
  /// The float value it quantizes, when no native tensor holds it yet (a fake quantization not
  /// fused into a layer: quantized where a reader asks for it), else null.
  const jit::Value* source = nullptr;
  /// Never negative: an s8 tensor of it holds what a u8 one would (a grid [0, 127] read
  /// unclamped after a ReLU is held in s8, whose saturation is the grid's clamp).
  bool non_negative = false;
  /// The largest integer it holds when never negative (the grid's top: 15 for a 4-bit grid).
  int64_t hi = 255;
};

/// What a native tensor of grid `q` holds.
Quantized held_on(const QuantForm& q, const jit::Value* source = nullptr) {
  return {q.scale, q.is_unsigned ? Type::u8 : Type::s8, source, q.is_unsigned,
          std::min<int64_t>(q.hi, q.is_unsigned ? 255 : 127)};
}

/// Packs `t` (plain, `plain_tag`, logical dims `dims`) into a buffer of layout `desc`.
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

/// A transposed convolution the runtime runs in the sub-pixel form (core/conv_transpose.h):
/// oneDNN's deconvolution kernels are two orders of magnitude slower than a convolution for
/// FSRCNN's 9×9 stride-3 output layer.
bool subpixel_pays(const LayerForm& f) {
  return f.kind == LayerForm::Kind::kTransposedConvolution && f.groups == 1 && f.dilation[0] == 1 &&
         f.dilation[1] == 1 && f.stride[0] == f.stride[1] && f.stride[0] > 1;
}

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

class PlanCompiler {
 public:
  PlanCompiler(const graph::SummaryGraph& graph, const InferenceOptions& options,
               const PlanRegion& region)
      : g_(graph), options_(options), region_(region), plan_(std::make_unique<Plan>()) {
    ours_.insert(region.ops.begin(), region.ops.end());
    whole_ = region.ops.empty() && region.inputs.empty() && region.outputs.empty();
  }

  std::unique_ptr<Plan> compile() {
    auto& graph = *g_.jit_graph();
    plan_->graph = g_.jit_graph();
    index_graph();
    declare_inputs();
    if (options_.native) plan_chains();
    size_t position = 0;
    for (jit::Node* node : graph.nodes()) {
      if (in_region(node)) emit_node(node, position);
      ++position;
    }
    declare_outputs();
    drop_unread_inputs();
    plan_->constant.assign(plan_->env.size(), false);
    for (int s : constants_) plan_->constant[s] = true;
    plan_->allocate();
    return std::move(plan_);
  }

 private:
  // ----- Region -----------------------------------------------------------------------------

  bool ours(int op) const { return whole_ || ours_.count(op); }

  /// Whether the plan runs `node`: every node of the whole graph; of a stage, its ops and the
  /// helper nodes whose inputs it has (a constant, a size read, a list of its values).
  bool in_region(const jit::Node* node) const {
    if (whole_ || node->kind() == c10::prim::Constant) return true;
    auto it = op_of_.find(node);
    if (it != op_of_.end()) return ours_.count(it->second) > 0;
    for (const jit::Value* in : node->inputs())
      if (!slot_of_.count(in)) return false;
    return true;
  }

  void add_input(const jit::Value* v, int id) {
    const int s = slot(v);
    plain_[s] = true;
    plan_->inputs.emplace_back(id, s);
    plan_->input_shapes.push_back(shape_of(v));
    // Another stage's fake-quantized value arrives as float on its grid: 8 bits hold it exactly.
    if (auto grid = options_.int8 ? grid_of(v) : std::nullopt) quant_[s] = held_on(*grid);
  }

  void declare_inputs() {
    const jit::Value* model_input = g_.jit_graph()->inputs().at(0);
    if (whole_) {
      add_input(model_input, g_.inputs().empty() ? -1 : g_.inputs()[0]);
      return;
    }
    std::set<int> given(region_.inputs.begin(), region_.inputs.end());
    given.insert(g_.inputs().begin(), g_.inputs().end());
    for (int id : given) {
      auto it = value_of_id_.find(id);
      const int producer = g_.values().at(id).producer;
      if (it != value_of_id_.end() && (producer < 0 || !ours(producer))) add_input(it->second, id);
    }
  }

  /// A stage is offered the model's input (for size reads of it); when none of its nodes reads
  /// it and it was not given as one of the stage's inputs, the stage does not ask for it, so a
  /// later stage runs on its own inputs alone.
  void drop_unread_inputs() {
    if (whole_) return;
    std::unordered_set<const jit::Value*> read;
    for (jit::Node* node : g_.jit_graph()->nodes())
      if (in_region(node)) read.insert(node->inputs().begin(), node->inputs().end());
    const std::set<int> given(region_.inputs.begin(), region_.inputs.end());
    for (size_t i = plan_->inputs.size(); i-- > 0;) {
      const int id = plan_->inputs[i].first;
      if (given.count(id) || read.count(value_of_id_.at(id))) continue;
      plan_->inputs.erase(plan_->inputs.begin() + static_cast<std::ptrdiff_t>(i));
      plan_->input_shapes.erase(plan_->input_shapes.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  void declare_outputs() {
    if (whole_) {
      const jit::Value* output = g_.jit_graph()->outputs().at(0);
      ensure_plain(output);
      plan_->outputs.emplace_back(-1, slot(output));
      return;
    }
    for (int id : region_.outputs) {
      const jit::Value* v = value_of_id_.at(id);
      ensure_plain(v);
      plan_->outputs.emplace_back(id, slot(v));
    }
  }

  // ----- Values -----------------------------------------------------------------------------

  void index_graph() {
    auto& graph = *g_.jit_graph();
    size_t k = 0;
    for (const jit::Value* in : graph.inputs())
      if (in->type()->cast<c10::TensorType>() && k < g_.inputs().size())
        value_id_[in] = g_.inputs()[k++];
    for (const auto& op : g_.ops()) {
      jit::Node* node = g_.jit_node(op.id);
      op_of_[node] = op.id;
      size_t slot_index = 0;
      for (const jit::Value* out : node->outputs())
        if (out->type()->cast<c10::TensorType>() && slot_index < op.outputs.size())
          value_id_[out] = op.outputs[slot_index++];
    }
    size_t position = 0;
    for (jit::Node* node : graph.nodes()) {
      position_[node] = position;
      for (const jit::Value* in : node->inputs()) last_use_[in] = position;
      ++position;
    }
    for (const jit::Value* out : graph.outputs()) last_use_[out] = kGraphOutput;
    for (const auto& [v, id] : value_id_) value_of_id_[id] = v;
    // A stage's outputs are read after its last step: no step may write over them in place.
    for (int id : region_.outputs)
      if (auto it = value_of_id_.find(id); it != value_of_id_.end())
        last_use_[it->second] = kGraphOutput;
  }

  int slot(const jit::Value* v) {
    auto it = slot_of_.find(v);
    if (it != slot_of_.end()) return it->second;
    const int s = plan_->add_slot();
    slot_of_[v] = s;
    plain_.push_back(false);
    return s;
  }

  std::vector<int64_t> shape_of(const jit::Value* v) const {
    auto it = value_id_.find(v);
    if (it != value_id_.end()) return g_.shape(it->second);
    if (auto t = v->type()->cast<c10::TensorType>())
      if (auto sizes = t->sizes().concrete_sizes()) return *sizes;
    throw std::logic_error("inference plan: no static shape for value %" + v->debugName());
  }

  std::string producer_name(const jit::Value* v) const {
    auto it = op_of_.find(v->node());
    return it != op_of_.end() ? g_.op(it->second).name : std::string("input");
  }

  /// The native tensor of `v` in layout `desc`, adding the conversion that makes it if needed.
  int as_native(const jit::Value* v, const memory::desc& desc) {
    const int s = slot(v);
    auto& natives = natives_of_[s];
    for (int n : natives)
      if (plan_->natives[n].desc == desc) return n;
    const int n = plan_->add_native(desc);
    copy_into(v, n);
    natives.push_back(n);
    return n;
  }

  /// Adds a step writing `v`'s value into native tensor `dst` (quantizing or dequantizing it when
  /// `v` is on an 8-bit grid and one side is float).
  void copy_into(const jit::Value* v, int dst) {
    const int s = slot(v);
    const auto& natives = natives_of_[s];
    const memory::desc& dst_desc = plan_->natives[dst].desc;
    auto q = quant_.find(s);
    if (natives.empty() && q != quant_.end() && q->second.source) {
      quantize_into(v, q->second, dst);
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
        if (q == quant_.end())
          throw std::logic_error("inference plan: value %" + v->debugName() + " has no grid");
        scale = static_cast<float>(from8 ? q->second.scale : 1.0 / q->second.scale);
      }
      const dnnl::reorder::primitive_desc pd(plan_->engine, plan_->natives[src].desc, plan_->engine,
                                             dst_desc, reorder_attr(scale));
      plan_->need_scratchpad(pd);
      auto reorder = std::make_unique<PrimitiveStep>(dnnl::reorder(pd), StepInfo{});
      reorder->use(DNNL_ARG_FROM, src, false);
      reorder->use(DNNL_ARG_TO, dst, true);
      step = std::move(reorder);
    } else {
      if (!plain_[s]) throw std::logic_error("inference plan: value %" + v->debugName() + " unset");
      if (is_int8(dst_desc) && q == quant_.end())
        throw std::logic_error("inference plan: plain value %" + v->debugName() + " has no grid");
      // A plain tensor on a grid (a LibTorch op's output of grid values) is exact in 8 bits.
      step = std::make_unique<ToNativeStep>(
          *plan_, s, dst, shape_of(v),
          is_int8(dst_desc) ? static_cast<float>(1.0 / q->second.scale) : 1.0f);
    }
    step->info.name = producer_name(v);
    step->info.kind = "Reorder";
    plan_->add_step(std::move(step));
  }

  /// Writes fake quantization output `v`, of grid `q`, into `dst`: an 8-bit `dst` straight from
  /// the float value it quantizes (one reorder: scale, round, saturate); a float `dst` through an
  /// 8-bit tensor of its layout (the value is the grid's, not the float one).
  void quantize_into(const jit::Value* v, const Quantized& q, int dst) {
    const memory::desc& dst_desc = plan_->natives[dst].desc;
    if (dst_desc.data_type() != q.type) {
      // Made in the grid's own type first (its saturation is the grid's clamp), then converted:
      // dequantized into float, or copied as it is into the other 8-bit type.
      const int held = as_native(v, with_type(dst_desc, q.type));
      const float scale = is_int8(dst_desc) ? 1.f : static_cast<float>(q.scale);
      auto step = std::make_unique<PrimitiveStep>(
          dnnl::reorder(dnnl::reorder::primitive_desc(plan_->engine, plan_->natives[held].desc,
                                                      plan_->engine, dst_desc,
                                                      reorder_attr(scale))),
          StepInfo{producer_name(v), "Reorder", {}, true, 0, false});
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
                                              plan_->engine, plan_->natives[src].desc,
                                              plan_->engine, dst_desc, reorder_attr(inverse))),
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
  int f32_native(const jit::Value* v) {
    const int s = slot(v);
    for (int n : natives_of_[s])
      if (!is_int8(plan_->natives[n].desc)) return n;
    if (natives_of_[s].empty()) {
      // A fake quantization's output not yet made: in the layout of the value it quantizes
      // (a layout change and a type change in one reorder is several times slower).
      auto q = quant_.find(s);
      if (q != quant_.end() && q->second.source && has_native(q->second.source))
        return as_native(v, plan_->natives[f32_native(q->second.source)].desc);
      return as_native(v, plain_desc(shape_of(v)));
    }
    return as_native(v, with_type(plan_->natives[natives_of_[s].front()].desc, Type::f32));
  }

  /// Makes `v`'s value available as a plain tensor in its slot.
  void ensure_plain(const jit::Value* v) {
    const int s = slot(v);
    if (plain_[s]) return;
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
    for (int n : natives_of_[s])
      if (src < 0 || !is_int8(plan_->natives[n].desc)) src = n;
    if (src < 0) src = as_native(v, with_type(plain_desc(shape_of(v)), quant_.at(s).type));
    const bool from8 = is_int8(plan_->natives[src].desc);
    auto step = std::make_unique<ToPlainStep>(
        *plan_, src, s, shape_of(v), from8 ? static_cast<float>(quant_.at(s).scale) : 1.0f);
    step->info.name = producer_name(v);
    plan_->add_step(std::move(step));
    plain_[s] = true;
  }

  /// Whether a native tensor of `v` exists or can be made without LibTorch (a fake quantization's
  /// output quantized where it is read).
  bool has_native(const jit::Value* v) {
    auto it = natives_of_.find(slot(v));
    if (it != natives_of_.end() && !it->second.empty()) return true;
    auto q = quant_.find(slot(v));
    return q != quant_.end() && q->second.source;
  }

  // ----- Fusion planning --------------------------------------------------------------------

  /// The op consuming `v` when it is `v`'s only use and `v` is not a graph output, else -1.
  int sole_user(const jit::Value* v) const {
    if (v->uses().size() != 1 || last_use_.at(v) == kGraphOutput) return -1;
    auto it = op_of_.find(v->uses()[0].user);
    return it == op_of_.end() ? -1 : it->second;
  }

  void plan_chains() {
    for (const auto& op : g_.ops()) {
      if (!ours(op.id) || claimed_.count(op.id) || !layer_form(g_, op.id)) continue;
      Chain c;
      c.ops = {op.id};
      c.subpixel = subpixel_pays(*layer_form(g_, op.id));
      c.output = g_.jit_node(op.id)->output(0);
      while (options_.fuse) {
        const int next = sole_user(c.output);
        if (next < 0 || !extend(c, next)) break;
      }
      if (options_.int8) absorb_quantization(c);
      for (size_t i = 0; i + 1 < c.ops.size(); ++i) absorbed_.insert(c.ops[i]);
      claimed_.insert(c.ops.begin(), c.ops.end());
      chain_end_[c.ops.back()] = std::move(c);
    }
  }

  /// The integer grid of layer `op`'s weights: of its quantizer's bits, or of 8 bits when no
  /// quantizer recorded them (post-training quantization writes the quantized values in place).
  std::optional<IntegerWeights> layer_grid(int op, const at::Tensor& weight) const {
    const int64_t bits = g_.op(op).weight_bits;
    return integer_weights(weight, bits > 0 ? bits : 8);
  }

  /// The grid of value `v` when it will be held in 8 bits: a fake quantization's output, or a max
  /// pooling's of such a value.
  std::optional<QuantForm> grid_of(const jit::Value* v) const {
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

  /// Ends the layer chain `c` with the fake quantization(s) after it when the layer can run in
  /// integers and write that grid: its input held in 8 bits, its weights on an integer grid, only
  /// ReLUs and clamps after it (they commute with the output scale), and a residual add's other
  /// operand on a grid of the output's type. Each quantization's range becomes a clamp post-op;
  /// a ReLU or clamp between two quantizations of one step (Distiller's post-training
  /// quantization of a layer's output and then of its ReLU's) is fused as well.
  void absorb_quantization(Chain& c) {
    const auto f = layer_form(g_, c.ops.front());
    if (c.subpixel || f->kind == LayerForm::Kind::kTransposedConvolution || !grid_of(f->input) ||
        !layer_grid(c.ops.front(), f->weight))
      return;
    auto scale_free = [](const EltwiseForm& e) {
      return e.algorithm == dnnl::algorithm::eltwise_clip ||
             (e.algorithm == dnnl::algorithm::eltwise_relu && e.alpha == 0);
    };
    for (const auto& p : c.post_ops)
      if (p.kind == PostOp::Kind::kEltwise && !scale_free(p.eltwise)) return;
    Chain q = c;
    std::optional<QuantForm> last;
    for (;;) {
      const int next = sole_user(q.output);
      if (next < 0 || claimed_.count(next) || !ours(next)) break;
      auto grid = quant_form(g_, next);
      auto e = grid ? std::nullopt : eltwise_form(g_, next);
      if (grid && last && grid->scale != last->scale) break;
      if (!grid && (!last || !e || !scale_free(*e))) break;
      if (grid) {
        last = grid;
        q.quantize = next;
        e = EltwiseForm{dnnl::algorithm::eltwise_clip, static_cast<float>(grid->lo * grid->scale),
                        static_cast<float>(grid->hi * grid->scale)};
      }
      q.post_ops.push_back({PostOp::Kind::kEltwise, *e, {}});
      q.ops.push_back(next);
      q.output = g_.jit_node(next)->output(0);
    }
    if (!last) return;
    while (q.ops.back() != q.quantize) {  // ends on the last quantization
      q.ops.pop_back();
      q.post_ops.pop_back();
    }
    q.output = g_.jit_node(q.quantize)->output(0);
    if (c.skip) {
      auto skip = grid_of(c.skip);
      if (!skip || skip->is_unsigned != last->is_unsigned) return;
    }
    q.float_ops = c.ops.size();
    q.float_post_ops = c.post_ops.size();
    c = std::move(q);
  }

  bool extend(Chain& c, int next) {
    // Another layer's chain took it first, or another stage runs it.
    if (claimed_.count(next) || !ours(next)) return false;
    jit::Node* node = g_.jit_node(next);
    const auto kind = g_.op(next).op_kind;
    const bool main_input = node->inputs().size() > 0 && node->input(0) == c.output;
    if (kind == OpKind::kBatchNorm) {
      if (c.batchnorm >= 0 || !c.post_ops.empty() || !main_input || !batchnorm_form(g_, next))
        return false;
      c.batchnorm = next;
    } else if (kind == OpKind::kAdd) {
      if (c.subpixel || c.skip || c.post_ops.size() >= 3 || !add_form(g_, next)) return false;
      const jit::Value* a = node->input(0);
      const jit::Value* b = node->input(1);
      if ((a == c.output) == (b == c.output)) return false;
      c.skip = a == c.output ? b : a;
      c.add = next;
      c.post_ops.push_back({PostOp::Kind::kSum, {}, {}});
    } else if (g_.op(next).op_kind == OpKind::kPReLU) {
      // oneDNN 2.6 has no JIT convolution with a PReLU post-op: the reference kernel it falls
      // back to made FSRCNN 60x slower. PReLU runs as its own primitive after the layer.
      return false;
    } else if (auto e = eltwise_form(g_, next)) {
      if (!main_input || c.post_ops.size() >= 3) return false;
      c.post_ops.push_back({PostOp::Kind::kEltwise, *e, {}});
    } else {
      return false;
    }
    c.ops.push_back(next);
    c.output = node->output(0);
    return true;
  }

  // ----- Emission ---------------------------------------------------------------------------

  void emit_node(jit::Node* node, size_t position) {
    if (node->kind() == c10::prim::Constant) {
      const int s = slot(node->output());
      plan_->env[s] = *jit::toIValue(node->output());
      plain_[s] = true;
      constants_.push_back(s);
      constant_slots_.insert(s);
      return;
    }
    if (foldable(node)) {
      fold_constant(node);
      return;
    }
    if (node->kind() == c10::prim::ListConstruct) {
      deferred_lists_.insert(node);  // made when a LibTorch step reads it
      return;
    }
    auto it = op_of_.find(node);
    if (it != op_of_.end() && options_.native) {
      const int op = it->second;
      auto chain = chain_end_.find(op);
      if (chain != chain_end_.end()) {
        emit_chain(chain->second);
        return;
      }
      if (absorbed_.count(op) || emit_single(op)) return;
    }
    emit_torch(node);
  }

  /// A node computing the same value on every run (its inputs all constants, no randomness, no
  /// mutation): run once now (a weight's transpose before a traced Linear).
  bool foldable(const jit::Node* node) const {
    if (node->kind() == c10::prim::ListConstruct || node->isNondeterministic() ||
        node->outputs().empty() || node->inputs().empty())
      return false;
    const std::string kind = node->kind().toQualString();
    if (kind.back() == '_') return false;
    for (const jit::Value* in : node->inputs()) {
      auto it = slot_of_.find(in);
      if (it == slot_of_.end() || !constant_slots_.count(it->second)) return false;
    }
    return true;
  }

  void fold_constant(const jit::Node* node) {
    torch::jit::Stack stack;
    for (const jit::Value* in : node->inputs()) stack.push_back(plan_->env[slot(in)]);
    graph::run_traced_node(const_cast<jit::Node*>(node), stack);
    for (size_t i = 0; i < node->outputs().size(); ++i) {
      const int s = slot(node->output(i));
      plan_->env[s] = std::move(stack.at(i));
      plain_[s] = true;
      constants_.push_back(s);
      constant_slots_.insert(s);
    }
  }

  void emit_torch(const jit::Node* node) {
    std::vector<int> inputs, outputs;
    for (const jit::Value* in : node->inputs()) {
      ensure_plain(in);
      inputs.push_back(slot(in));
    }
    for (const jit::Value* out : node->outputs()) {
      outputs.push_back(slot(out));
      plain_[outputs.back()] = true;
      if (!options_.int8 || !out->type()->cast<c10::TensorType>()) continue;
      if (auto grid = grid_of(out)) quant_[slot(out)] = held_on(*grid);
    }
    // The plan holds the graph; running a node does not change it.
    auto step = std::make_unique<TorchStep>(const_cast<jit::Node*>(node), inputs, outputs);
    auto it = op_of_.find(node);
    if (it != op_of_.end()) {
      step->info.name = g_.op(it->second).name;
      step->info.ops = {g_.op(it->second).name};
      step->info.macs = g_.macs(it->second);
    } else {
      step->info.name = step->info.kind;
    }
    plan_->add_step(std::move(step));
  }

  StepInfo info_of(const std::vector<int>& ops, const std::string& kind) const {
    StepInfo info;
    info.name = g_.op(ops.front()).name;
    info.kind = kind;
    for (int op : ops) {
      info.ops.push_back(g_.op(op).name);
      info.macs += g_.macs(op);
      if (kind.empty()) info.kind += (info.kind.empty() ? "" : "+") + g_.op(op).type;
    }
    return info;
  }

  void emit_chain(const Chain& c);
  bool emit_single(int op);
  bool emit_int8_chain(const Chain& c);
  bool int8_post_ops(const Chain& c, bool grid, const QuantForm& out, Type dst_type,
                     dnnl::post_ops& post_ops);
  bool emit_qnnpack(const Chain& c, const LayerForm& f, const IntegerWeights& weights,
                    const compress::ChannelAffine& affine, const Quantized& in,
                    const QuantForm& out, Type dst_type);
  int split_input(const jit::Value* input, const Quantized& in, const std::vector<int64_t>& shape,
                  int64_t groups, const memory::desc& split_desc);
  bool emit_quantize(int op);
  bool emit_int8_view(int op);
  bool emit_pool(int op);
  bool emit_eltwise(int op);
  void add_unary_step(int op, dnnl::primitive primitive, int src, const memory::desc& dst_desc,
                      dnnl::memory weights = {});
  bool emit_prelu(int op);
  bool emit_add(int op);
  bool emit_concat(int op);
  memory::desc layer_desc(const LayerForm& f, const std::vector<int64_t>& src,
                          const std::vector<int64_t>& dst, const dnnl::primitive_attr& attr,
                          bool plain_dst, dnnl::primitive& primitive, memory::desc& weights_desc,
                          memory::desc& src_desc, const LayerTypes& types = {});
  dnnl::primitive_attr post_ops_of(const Chain& c);
  int chain_destination(const Chain& c, const memory::desc& dst_desc);
  void own_layer_args(PrimitiveStep& step, const Chain& c, const LayerForm& f,
                      const std::vector<int64_t>& src_shape, const std::vector<int64_t>& dst_shape,
                      const memory::desc& weights_desc);

  const graph::SummaryGraph& g_;
  InferenceOptions options_;
  PlanRegion region_;
  bool whole_ = true;
  std::set<int> ours_;
  std::unique_ptr<Plan> plan_;
  std::unordered_map<int, const jit::Value*> value_of_id_;
  std::unordered_map<const jit::Value*, int> slot_of_;
  std::unordered_map<const jit::Value*, int> value_id_;
  std::unordered_map<int, std::vector<int>> natives_of_;
  std::vector<char> plain_;
  std::vector<int> constants_;
  std::unordered_map<const jit::Node*, int> op_of_;
  std::unordered_map<const jit::Node*, size_t> position_;
  std::unordered_map<const jit::Value*, size_t> last_use_;
  std::unordered_map<int, Chain> chain_end_;
  std::unordered_set<int> absorbed_, claimed_, constant_slots_;
  std::unordered_set<const jit::Node*> deferred_lists_;
  /// Values on an 8-bit grid, by slot.
  std::unordered_map<int, Quantized> quant_;
};

/// A convolution primitive on zeroed buffers of its own layouts, for timing.
class ConvolutionRunner {
 public:
  explicit ConvolutionRunner(const dnnl::convolution_forward::primitive_desc& pd)
      : engine_(pd.get_engine()), stream_(engine_), conv_(pd) {
    for (const auto& [arg, desc] : {std::make_pair(DNNL_ARG_SRC, pd.src_desc()),
                                    std::make_pair(DNNL_ARG_WEIGHTS, pd.weights_desc()),
                                    std::make_pair(DNNL_ARG_BIAS, pd.bias_desc()),
                                    std::make_pair(DNNL_ARG_DST, pd.dst_desc()),
                                    std::make_pair(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc())}) {
      if (desc.get_size() == 0) continue;
      memory m(desc, engine_);
      std::memset(m.get_data_handle(), 0, desc.get_size());
      args_[arg] = m;
    }
  }
  /// Milliseconds per run over a block of `n` runs.
  double block(int n) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) conv_.execute(stream_, args_);
    stream_.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
               .count() /
           n;
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::convolution_forward conv_;
  std::unordered_map<int, memory> args_;
};

/// Whether convolution `a` runs faster than `b`: five rounds of a block of runs of each in turn
/// (a block lasts about a quarter of a millisecond), the fastest block of each compared. Tens of
/// microseconds per run, so a handful of single runs would decide by noise.
bool runs_faster(const dnnl::convolution_forward::primitive_desc& a,
                 const dnnl::convolution_forward::primitive_desc& b) {
  ConvolutionRunner ra(a), rb(b);
  ra.block(1);
  rb.block(1);  // first runs: caches, page faults
  const double once = std::max(1e-4, std::min(ra.block(1), rb.block(1)));
  const int n = static_cast<int>(std::clamp(0.25 / once, 1.0, 200.0));
  double best_a = std::numeric_limits<double>::infinity(), best_b = best_a;
  for (int r = 0; r < 5; ++r) {
    best_a = std::min(best_a, ra.block(n));
    best_b = std::min(best_b, rb.block(n));
  }
  return best_a < best_b;
}

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
  } catch (const dnnl::error&) {
    // No oneDNN kernel for this geometry: every op of the chain runs as LibTorch's operator.
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
    natives_of_[slot(c.output)] = {dst};
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
  plain_[slot(c.output)] = true;
}

/// `post_ops` with each run of ReLUs and clamps as one clamp to the intersection of their ranges
/// (a post-op costs a pass in the kernel's inner loop).
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
      const auto skip = quant_.find(slot(c.skip));
      // (A never-negative s8 skip is copied into the u8 output as it is.)
      if (grid && (skip == quant_.end() || (skip->second.type != dst_type &&
                                            !(dst_type == Type::u8 && skip->second.non_negative))))
        return false;
      post_ops.append_sum(grid ? static_cast<float>(skip->second.scale / out.scale) : 1.f);
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
  const auto in = quant_.find(slot(f.input));
  if (in == quant_.end() || c.subpixel || f.kind == LayerForm::Kind::kTransposedConvolution)
    return false;
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
  const auto sum_scale = weights->scale.to(at::kDouble) * in->second.scale * affine.scale;
  if ((sum_scale == 0).any().item<bool>()) return false;
  const Type dst_type = !grid ? Type::f32 : out.is_unsigned ? Type::u8 : Type::s8;
  dnnl::post_ops post_ops;
  if (!int8_post_ops(c, grid.has_value(), out, dst_type, post_ops)) return false;
  if (options_.int8_engine == Int8Engine::kQnnpack && grid &&
      emit_qnnpack(c, f, *weights, affine, in->second, out, dst_type))
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
  const bool signed_input = in->second.type == Type::s8 && !in->second.non_negative;
  LayerTypes types{isa.pairs_saturate && !signed_input ? Type::u8 : in->second.type, Type::s8,
                   dst_type};
  const bool depthwise =
      f.kind == LayerForm::Kind::kConvolution && f.groups > 1 && f.weight.size(1) == 1;
  const bool split = !int8_sums_exact(isa, weights->q, signed_input, in->second.hi, depthwise);
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
  const int src = split ? split_input(f.input, in->second, input_shape, f.groups, src_desc)
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
  natives_of_[slot(c.output)] = {dst};
  if (grid)
    quant_[slot(c.output)] = {out.scale, dst_type, nullptr, out.is_unsigned,
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
    const auto skip = quant_.find(slot(c.skip));
    if (skip == quant_.end()) return false;
    l.sum = true;
    l.skip_scale = skip->second.scale;
    l.skip_signed = dst_type == Type::s8 && !skip->second.non_negative;
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
  natives_of_[slot(c.output)] = {dst};
  quant_[slot(c.output)] = {out.scale, dst_type, nullptr, out.is_unsigned,
                            std::min<int64_t>(out.hi, dst_type == Type::u8 ? 255 : 127)};
  return true;
}

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
  quant_[slot(node->output(0))] = {q->scale, type, node->input(0), q->is_unsigned,
                                   std::min<int64_t>(q->hi, type == Type::u8 ? 255 : 127)};
  return true;
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
  const bool last_use = last_use_.at(c.skip) == position_.at(g_.jit_node(c.add));
  for (int n : natives_of_[slot(c.skip)])
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
  natives_of_[slot(g_.jit_node(op)->output(0))] = {dst};
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

bool PlanCompiler::emit_single(int op) {
  const auto kind = g_.op(op).op_kind;
  if (kind == OpKind::kFakeQuantize) return options_.int8 && emit_quantize(op);
  if ((kind == OpKind::kSlice || kind == OpKind::kPad) && options_.int8) return emit_int8_view(op);
  if (kind == OpKind::kPReLU) return emit_prelu(op);
  if (kind == OpKind::kMaxPool || kind == OpKind::kAvgPool || kind == OpKind::kAdaptiveAvgPool)
    return emit_pool(op);
  if (kind == OpKind::kAdd) return emit_add(op);
  if (kind == OpKind::kConcat) return emit_concat(op);
  return emit_eltwise(op);
}

/// A slice or a zero padding of channels of a value held in 8 bits (ResNet's option-A shortcut
/// between integer layers), done on its 8-bit NHWC tensor: no dequantizing, no LibTorch.
bool PlanCompiler::emit_int8_view(int op) {
  jit::Node* node = g_.jit_node(op);
  const jit::Value* in = node->input(0);
  const auto grid = quant_.find(slot(in));
  if (grid == quant_.end() || !has_native(in) || !grid_of(node->output(0))) return false;
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
    return memory::desc(dims_of(shape), grid->second.type, Tag::nhwc);
  };
  const int src = as_native(in, nhwc(in_shape));
  const int dst = plan_->add_native(nhwc(out_shape));
  auto step = std::make_unique<Int8ViewStep>(src, dst, in_shape, out_shape, view);
  step->info = info_of({op}, g_.op(op).type);
  step->info.native = true;
  plan_->add_step(std::move(step));
  natives_of_[slot(node->output(0))] = {dst};
  quant_[slot(node->output(0))] = {grid->second.scale, grid->second.type, nullptr,
                                   grid->second.non_negative, grid->second.hi};
  return true;
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
  const auto grid = quant_.find(slot(node->input(0)));
  const bool int8 = !plain && f->algorithm == dnnl::algorithm::pooling_max &&
                    grid != quant_.end() && !natives_of_[slot(node->input(0))].empty() &&
                    is_int8(plan_->natives[natives_of_[slot(node->input(0))].front()].desc);
  try {
    const int src = plain  ? as_native(node->input(0), plain_in)
                    : int8 ? natives_of_[slot(node->input(0))].front()
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
      quant_[slot(node->output(0))] = {grid->second.scale, grid->second.type, nullptr,
                                       grid->second.non_negative, grid->second.hi};
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
  natives_of_[slot(node->output(0))] = {dst};
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
    natives_of_[slot(node->output(0))] = {dst};
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

/// Median milliseconds of `plan` over 5 runs (after one) on random inputs of its shapes.
double time_plan(Plan& plan) {
  // A generator of its own: compiling a plan leaves the global random state as it was.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(0);
  std::map<int, at::Tensor> values;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    values[plan.inputs[i].first] = at::randn(plan.input_shapes[i], generator);
  std::vector<double> times;
  for (int r = 0; r < 6; ++r) {
    auto given = values;
    const auto t0 = std::chrono::steady_clock::now();
    plan.run_values(given);
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin() + 1, times.end());
  return times[3];
}

}  // namespace

std::unique_ptr<Plan> compile_plan(const graph::SummaryGraph& graph,
                                   const InferenceOptions& options, const PlanRegion& region) {
  if (!options.int8) return PlanCompiler(graph, options, region).compile();
  if (options.int8_engine == Int8Engine::kOneDnn) {
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "oneDNN (as asked)";
    return plan;
  }
  if (!qnnpack_available()) {
    if (options.int8_engine == Int8Engine::kQnnpack)
      throw InputError("--int8-engine qnnpack: this LibTorch has no QNNPACK engine");
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "oneDNN (this LibTorch has no QNNPACK)";
    return plan;
  }
  if (options.int8_engine == Int8Engine::kQnnpack) {
    auto plan = PlanCompiler(graph, options, region).compile();
    plan->int8_engine = "QNNPACK (as asked)";
    return plan;
  }
  // kAuto: the two engines timed on this shape; the faster is kept.
  InferenceOptions each = options;
  each.int8_engine = Int8Engine::kOneDnn;
  auto onednn = PlanCompiler(graph, each, region).compile();
  each.int8_engine = Int8Engine::kQnnpack;
  auto qnnpack = PlanCompiler(graph, each, region).compile();
  const bool any = std::any_of(qnnpack->steps.begin(), qnnpack->steps.end(),
                               [](const auto& s) { return s->info.qnnpack; });
  if (!any) {
    onednn->int8_engine = "oneDNN (no layer QNNPACK can take)";
    return onednn;
  }
  torch::NoGradGuard no_grad;
  const double a = time_plan(*onednn), b = time_plan(*qnnpack);
  auto& kept = a <= b ? onednn : qnnpack;
  kept->int8_engine = std::string(a <= b ? "oneDNN" : "QNNPACK") + ", timed faster (oneDNN " +
                      fixed(a, 3) + " ms, QNNPACK " + fixed(b, 3) + " ms)";
  return std::move(kept);
}

}  // namespace igb::runtime
