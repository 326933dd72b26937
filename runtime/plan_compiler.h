#pragma once

// The plan compiler's internals: a traced forward pass (or a region of it) turned into a Plan
// (runtime/plan.h). One PlanCompiler per compilation; its member functions are spread over the
// files that name the work they do:
//   plan_compiler.cpp      the driver: region, inputs and outputs, one node at a time, and
//                          compile_plan() with its choice of INT8 engine;
//   plan_values.cpp        the value table: slots, native tensors, conversions, 8-bit grids;
//   plan_fusion.cpp        the layer chains (BatchNorm, activations, residual adds and fake
//                          quantizations fused into a layer) and the gates (x·sigmoid(x), ...);
//   emit_float_layers.cpp  a chain's layer as a float32 oneDNN primitive;
//   emit_int8_layers.cpp   a chain's layer in integers, fake quantizations, 8-bit views;
//   qnnpack_emit.cpp       a chain's layer on LibTorch's QNNPACK kernels;
//   emit_views.cpp         channel shuffles and slices as reorders between views;
//   emit_single_ops.cpp    pools, eltwise activations and gates, PReLU, batch norms, sums and
//                          products, concatenations alone;
//   emit_libtorch.cpp      the fallback: an op as LibTorch's operator, constants folded.
// Internal to runtime/.

#include <ATen/core/Tensor.h>

#include <dnnl.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compress/batchnorm_folding.h"
#include "graph/summary_graph.h"
#include "runtime/int8_grids.h"
#include "runtime/op_forms.h"
#include "runtime/plan.h"

namespace torch::jit {
struct Node;
struct Value;
}  // namespace torch::jit

// A named namespace rather than an anonymous one: the compiler's member functions are defined in
// several files, and its short aliases (Tag, Type) stay out of the rest of runtime/.
namespace igb::runtime::compiler {

namespace jit = torch::jit;
using dnnl::memory;
using graph::OpKind;
using Tag = memory::format_tag;
using Type = memory::data_type;

/// The last use of a value read after the plan's last step (a graph or stage output).
inline constexpr size_t kGraphOutput = std::numeric_limits<size_t>::max();

memory::desc any_desc(const std::vector<int64_t>& shape, Type type = Type::f32);

/// `desc` with its values of type `type` (the same layout).
memory::desc with_type(memory::desc desc, Type type);

bool is_int8(const memory::desc& d);

/// `shape` in the layout `like` has (plain, channels last or channel-blocked), of `like`'s type;
/// nothing when that layout is another.
std::optional<memory::desc> same_layout(const memory::desc& like,
                                        const std::vector<int64_t>& shape);

/// Whether oneDNN picked its reference implementation (no kernel of this CPU takes the
/// combination): often two orders of magnitude slower than LibTorch's operator.
template <class PrimitiveDesc>
bool is_reference(const PrimitiveDesc& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

/// Packs `t` (plain, `plain_tag`, logical dims `dims`) into a buffer of layout `desc`.
memory pack(const at::Tensor& t, const memory::dims& dims, Tag plain_tag, const memory::desc& desc,
            const dnnl::engine& engine, dnnl::stream& stream);

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

/// `post_ops` with each run of ReLUs and clamps as one clamp to the intersection of their ranges
/// (a post-op costs a pass in the kernel's inner loop).
std::vector<PostOp> merged_clamps(const std::vector<PostOp>& post_ops);

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

/// A transposed convolution the runtime runs in the sub-pixel form (core/conv_transpose.h):
/// oneDNN's deconvolution kernels are two orders of magnitude slower than a convolution for
/// FSRCNN's 9×9 stride-3 output layer.
bool subpixel_pays(const LayerForm& f);

/// x · f(x) where f is a run of elementwise ops of x alone, computing a sigmoid or a hard sigmoid:
/// the SiLU and the hard swish as exporters write them (Sigmoid then Mul; HardSigmoid, or
/// x + 3 clamped to [0, 6] and divided by 6, then Mul), one oneDNN eltwise (swish, hardswish).
struct Gate {
  /// f's ops, then the product.
  std::vector<int> ops;
  EltwiseForm form;
  const jit::Value* input = nullptr;
  const jit::Value* output = nullptr;
};

/// A channel shuffle as PyTorch writes it (ShuffleNet's reshape to N×g×C/g×H×W, transpose of
/// the two channel axes, reshape back): one reorder between two views of the channels.
struct Shuffle {
  /// The reshape, the transpose (and a contiguous copy), the reshape back.
  std::vector<int> ops;
  int64_t groups = 1;
  const jit::Value* input = nullptr;
  const jit::Value* output = nullptr;
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
Quantized held_on(const QuantForm& q, const jit::Value* source = nullptr);

/// What the compiler knows of one traced value: what the graph says of it, and where and in which
/// forms the plan holds it.
struct ValueInfo {
  /// Its summary-graph value id, when it has one.
  std::optional<int> id;
  /// The position of the last node reading it (kGraphOutput: read after the last step).
  std::optional<size_t> last_use;
  /// Its slot of Plan::env, or -1 while the plan holds it nowhere.
  int slot = -1;
  /// Whether its slot holds it as a plain tensor.
  bool plain = false;
  /// Computed once, while compiling (its slot is kept across runs).
  bool constant = false;
  /// The native tensors holding it, in different layouts or types.
  std::vector<int> natives;
  /// Its 8-bit grid, when it is held on one.
  std::optional<Quantized> grid;
};

class PlanCompiler {
 public:
  PlanCompiler(const graph::SummaryGraph& graph, const InferenceOptions& options,
               const PlanRegion& region);
  std::unique_ptr<Plan> compile();

 private:
  // ----- Region (plan_compiler.cpp) ----------------------------------------------------------
  bool ours(int op) const { return whole_ || ours_.count(op); }
  bool in_region(const jit::Node* node) const;
  void add_input(const jit::Value* v, int id);
  void declare_inputs();
  void drop_unread_inputs();
  void declare_outputs();
  void index_graph();

  // ----- Values (plan_values.cpp) ------------------------------------------------------------
  /// What is known of `v`, a slot given to it first when it has none.
  ValueInfo& value(const jit::Value* v);
  int slot(const jit::Value* v) { return value(v).slot; }
  bool has_slot(const jit::Value* v) const;
  size_t last_use_of(const jit::Value* v) const { return values_.at(v).last_use.value(); }
  std::vector<int64_t> shape_of(const jit::Value* v) const;
  std::string producer_name(const jit::Value* v) const;
  int as_native(const jit::Value* v, const memory::desc& desc);
  void copy_into(const jit::Value* v, int dst);
  void quantize_into(const jit::Value* v, const Quantized& q, int dst);
  int f32_native(const jit::Value* v);
  void ensure_plain(const jit::Value* v);
  bool has_native(const jit::Value* v);
  std::optional<QuantForm> grid_of(const jit::Value* v) const;

  // ----- Fusion planning (plan_fusion.cpp) ---------------------------------------------------
  int sole_user(const jit::Value* v) const;
  void plan_chains();
  std::optional<IntegerWeights> layer_grid(int op, const at::Tensor& weight) const;
  void absorb_quantization(Chain& c);
  bool extend(Chain& c, int next);
  std::optional<Gate> gate_of(const jit::Value* x) const;
  void plan_gates();

  // ----- Emission: dispatch (plan_compiler.cpp), LibTorch (emit_libtorch.cpp) ----------------
  void emit_node(jit::Node* node, size_t position);
  bool emit_single(int op);
  StepInfo info_of(const std::vector<int>& ops, const std::string& kind) const;
  bool foldable(const jit::Node* node) const;
  void fold_constant(const jit::Node* node);
  void emit_torch(const jit::Node* node);

  // ----- Float layers (emit_float_layers.cpp) ------------------------------------------------
  void emit_chain(const Chain& c);
  memory::desc layer_desc(const LayerForm& f, const std::vector<int64_t>& src,
                          const std::vector<int64_t>& dst, const dnnl::primitive_attr& attr,
                          bool plain_dst, dnnl::primitive& primitive, memory::desc& weights_desc,
                          memory::desc& src_desc, const LayerTypes& types = {});
  dnnl::primitive_attr post_ops_of(const Chain& c);
  int chain_destination(const Chain& c, const memory::desc& dst_desc);
  void own_layer_args(PrimitiveStep& step, const Chain& c, const LayerForm& f,
                      const std::vector<int64_t>& src_shape, const std::vector<int64_t>& dst_shape,
                      const memory::desc& weights_desc);

  // ----- INT8 layers (emit_int8_layers.cpp, qnnpack_emit.cpp) --------------------------------
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

  // ----- Views (emit_views.cpp) --------------------------------------------------------------
  std::optional<Shuffle> shuffle_from(int op) const;
  void plan_shuffles();
  bool emit_shuffle(const Shuffle& s);
  bool emit_slice(int op);

  // ----- Single ops (emit_single_ops.cpp) ----------------------------------------------------
  bool emit_pool(int op);
  bool emit_eltwise(int op);
  void add_unary_step(int op, dnnl::primitive primitive, int src, const memory::desc& dst_desc,
                      dnnl::memory weights = {});
  bool emit_prelu(int op);
  bool emit_binary(int op);
  bool emit_batchnorm(int op);
  bool emit_concat(int op);
  void emit_gate(const Gate& gate);

  const graph::SummaryGraph& g_;
  InferenceOptions options_;
  PlanRegion region_;
  bool whole_ = true;
  std::set<int> ours_;
  std::unique_ptr<Plan> plan_;
  /// The value table. An unordered_map: a reference to an entry stays valid while entries are
  /// added (as_native() holds one across the conversion it emits, which may reach other values).
  std::unordered_map<const jit::Value*, ValueInfo> values_;
  std::unordered_map<int, const jit::Value*> value_of_id_;
  std::unordered_map<const jit::Node*, int> op_of_;
  std::unordered_map<const jit::Node*, size_t> position_;
  std::unordered_map<int, Chain> chain_end_;
  /// The gates no layer's chain took, by their product's op.
  std::unordered_map<int, Gate> gate_end_;
  /// The channel shuffles, by their last op.
  std::unordered_map<int, Shuffle> shuffle_end_;
  std::unordered_set<int> absorbed_, claimed_;
  std::unordered_set<const jit::Node*> deferred_lists_;
};

}  // namespace igb::runtime::compiler
