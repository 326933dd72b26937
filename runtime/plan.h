#pragma once

// The compiled form of one forward pass for one input shape (runtime/inference_model.h): the
// steps, the values they pass, the arena of oneDNN buffers. Internal to runtime/.

#include <ATen/core/ivalue.h>

#include <dnnl.hpp>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/inference_model.h"

namespace torch::jit {
struct Graph;
struct Node;
}  // namespace torch::jit

namespace igb::graph {
class SummaryGraph;
}  // namespace igb::graph

namespace igb::runtime {

inline dnnl::memory::dims dims_of(const std::vector<int64_t>& shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

/// A value the plan keeps in oneDNN's layout, in a buffer of the arena.
struct NativeTensor {
  dnnl::memory::desc desc;
  /// Another native tensor whose buffer this one writes in place (a residual add's destination
  /// taking over the skip's buffer), or -1.
  int alias = -1;
  int buffer = -1;
  dnnl::memory memory;
};

class Plan;

/// One step of a plan.
class Step {
 public:
  virtual ~Step() = default;
  virtual void run(Plan& plan) = 0;
  /// Binds the native tensors it uses once the arena exists.
  virtual void bind(Plan& plan) {}
  /// Native tensors read and written, for the arena's liveness.
  std::vector<int> reads, writes;
  /// Value slots (Plan::env) read, for releasing them after their last use.
  std::vector<int> slot_reads;
  StepInfo info;
};

/// The oneDNN implementation `primitive` runs ("jit_1x1:avx2", "ref:any").
std::string implementation_of(const dnnl::primitive& primitive);

/// A oneDNN primitive with its arguments: native tensors by id, and memory it owns (pre-packed
/// weights, folded biases, PReLU slopes).
class PrimitiveStep : public Step {
 public:
  PrimitiveStep(dnnl::primitive primitive, StepInfo step_info);
  void run(Plan& plan) override;
  void bind(Plan& plan) override;
  /// Argument `arg` is native tensor `native`.
  void use(int arg, int native, bool written);
  /// Argument `arg` is memory the step owns.
  void own(int arg, dnnl::memory memory) { owned_.emplace_back(arg, std::move(memory)); }

 private:
  dnnl::primitive primitive_;
  std::vector<std::pair<int, int>> natives_;
  std::vector<std::pair<int, dnnl::memory>> owned_;
  std::unordered_map<int, dnnl::memory> args_;
};

/// A plain tensor in a value slot copied into a native tensor's layout.
class ToNativeStep : public Step {
 public:
  /// `scale` multiplies the values on the way (1 / the grid's step: quantizing into an 8-bit
  /// native tensor).
  ToNativeStep(Plan& plan, int slot, int native, const std::vector<int64_t>& shape,
               float scale = 1);
  void run(Plan& plan) override;
  /// Decides whether the native tensor can be the plain tensor itself (below).
  void bind(Plan& plan) override;

 private:
  int slot_, native_;
  std::vector<int64_t> shape_;
  dnnl::memory::desc plain_;
  dnnl::reorder reorder_;
  /// The native layout is the plain one and nothing else writes the native tensor or takes its
  /// buffer over: it points at the tensor's data instead of a copy (kept alive in `held_`).
  bool zero_copy_ = false;
  at::Tensor held_;
};

/// A native tensor copied out to a fresh plain (contiguous) tensor in a value slot.
class ToPlainStep : public Step {
 public:
  /// `scale` multiplies the values on the way (the grid's step: dequantizing an 8-bit native).
  ToPlainStep(Plan& plan, int native, int slot, const std::vector<int64_t>& shape, float scale = 1);
  void run(Plan& plan) override;

 private:
  int native_, slot_;
  std::vector<int64_t> shape_;
  dnnl::memory::desc plain_;
  dnnl::reorder reorder_;
};

/// The end of a transposed convolution in the sub-pixel form: the phase channels of a native
/// tensor put in place (pixel shuffle) and cropped, into a plain tensor in a slot.
class SubpixelStep : public Step {
 public:
  /// `crop` is {top, left, height, width} of the output in the shuffled tensor.
  SubpixelStep(Plan& plan, int native, int slot, std::vector<int64_t> shape, int64_t stride,
               std::vector<int64_t> crop);
  void run(Plan& plan) override;

 private:
  int native_, slot_;
  std::vector<int64_t> shape_;
  int64_t stride_;
  std::vector<int64_t> crop_;
  dnnl::memory::desc plain_;
  dnnl::reorder reorder_;
};

/// A copy between views of two native tensors' buffers: `from` describes part or all of the source
/// tensor's buffer (other dimensions and strides: a channel shuffle's five-dimensional view, a
/// slice's sub-memory), `to` the destination's. One oneDNN reorder.
class ViewReorderStep : public Step {
 public:
  ViewReorderStep(Plan& plan, int src, dnnl::memory::desc from, int dst, dnnl::memory::desc to,
                  StepInfo step_info);
  void run(Plan& plan) override;

 private:
  int src_, dst_;
  dnnl::memory::desc from_, to_;
  dnnl::reorder reorder_;
};

/// A strided slice of an 8-bit NHWC native tensor, or the tensor zero-padded along its channels
/// (ResNet's option-A shortcut, `x[:, :, ::2, ::2]` padded with zero channels), written into
/// another 8-bit NHWC native tensor: output element (n, c, h, w) is input element
/// (n, (c − pad_front)·step[0] + start[0], h·step[1] + start[1], w·step[2] + start[2]), or 0 where
/// c − pad_front falls outside the `channels` taken. Zero is the grid's 0 (zero point 0).
class Int8ViewStep : public Step {
 public:
  struct View {
    /// Per channel, row and column: the first element taken and the step.
    int64_t start[3] = {0, 0, 0}, step[3] = {1, 1, 1};
    /// Zero channels before the ones taken, and how many are taken.
    int64_t pad_front = 0, channels = 0;
  };
  /// `in` and `out` are NCHW shapes.
  Int8ViewStep(int src, int dst, std::vector<int64_t> in, std::vector<int64_t> out, View view);
  void run(Plan& plan) override;

 private:
  int src_, dst_;
  std::vector<int64_t> in_, out_;
  View view_;
};

/// One traced node run by LibTorch on the values in the plan's slots.
class TorchStep : public Step {
 public:
  TorchStep(torch::jit::Node* node, std::vector<int> inputs, std::vector<int> outputs);
  void run(Plan& plan) override;

 private:
  torch::jit::Node* node_;
  std::vector<int> inputs_, outputs_;
};

/// The compiled plan.
class Plan {
 public:
  Plan();
  /// Runs every step on `input` (the plan's one input); returns its first output (a tuple's first
  /// element).
  at::Tensor run(const at::Tensor& input);
  /// A stage's plan: `values` holds its inputs by summary-graph value id; its outputs are added.
  /// Returns false, running nothing, when an input is missing or not of the shape the plan was
  /// made for.
  bool run_values(std::map<int, at::Tensor>& values);
  /// Median milliseconds of each step over `repeats` runs (after one untimed run).
  std::vector<double> time_steps(const at::Tensor& input, int repeats);
  /// Gives each native tensor a buffer of the arena (buffers shared by tensors whose lives do
  /// not overlap) and binds the steps. Called once, after the last step is added.
  void allocate();

  int add_slot() {
    env.emplace_back();
    return static_cast<int>(env.size()) - 1;
  }
  int add_native(const dnnl::memory::desc& desc, int alias = -1);
  void add_step(std::unique_ptr<Step> step) { steps.push_back(std::move(step)); }
  dnnl::memory& memory(int native) { return natives.at(native).memory; }
  /// Makes the plan's scratchpad hold what primitive `pd` (made with user_scratchpad()) needs.
  template <class PrimitiveDesc>
  void need_scratchpad(const PrimitiveDesc& pd) {
    scratchpad_bytes = std::max(scratchpad_bytes, pd.scratchpad_desc().get_size());
  }

  dnnl::engine engine;
  dnnl::stream stream;
  std::vector<c10::IValue> env;
  /// Slots holding constants (kept across runs; the others are cleared after their last use).
  std::vector<bool> constant;
  std::vector<NativeTensor> natives;
  std::vector<std::unique_ptr<Step>> steps;
  /// Summary-graph value ids of the inputs and outputs with their slots, and the inputs' shapes.
  std::vector<std::pair<int, int>> inputs, outputs;
  std::vector<std::vector<int64_t>> input_shapes;
  /// The traced graph whose nodes the LibTorch steps run.
  std::shared_ptr<torch::jit::Graph> graph;
  /// With InferenceOptions::int8: whose kernels compute the integer layers, and why
  /// ("oneDNN, timed faster (oneDNN 0.190 ms, QNNPACK 1.210 ms)"); empty otherwise.
  std::string int8_engine;
  /// Bytes of the arena (activations) and of the weights the steps own.
  int64_t arena_bytes = 0;
  /// One scratchpad for every primitive of the plan (its steps run one at a time). oneDNN's own
  /// scratchpad is per thread and ties a primitive to the thread that made it; a plan is made in
  /// one thread and run in others (serving workers, the cascade), so its primitives take this one.
  size_t scratchpad_bytes = 0;
  dnnl::memory scratchpad;

 private:
  void run_steps(std::vector<double>* times);
  void clear_ends();
  std::vector<at::Tensor> arena_;
  /// Per step: the slots whose last reader it is.
  std::vector<std::vector<int>> release_;
};

/// The plain (row-major) float32 layout of `shape`.
dnnl::memory::desc plain_desc(const std::vector<int64_t>& shape);

/// A reorder's attributes: the plan's scratchpad and, unless 1, a scale applied to every value.
dnnl::primitive_attr reorder_attr(float scale);

/// `attr` with the scratchpad the caller gives (Plan::scratchpad) instead of oneDNN's per-thread
/// one: every primitive of a plan is made with it.
dnnl::primitive_attr user_scratchpad(dnnl::primitive_attr attr = dnnl::primitive_attr());

/// The part of a traced graph a plan computes.
struct PlanRegion {
  /// Summary-graph op ids; empty: every op.
  std::vector<int> ops;
  /// Value ids the caller gives (the model's input is given too); empty: the model's input.
  std::vector<int> inputs;
  /// Value ids returned; empty: the model's first output.
  std::vector<int> outputs;
};

/// Compiles the traced forward pass `graph` (the summary graph of the model on one input shape),
/// or the `region` of it, into a plan.
std::unique_ptr<Plan> compile_plan(const graph::SummaryGraph& graph,
                                   const InferenceOptions& options, const PlanRegion& region = {});

}  // namespace igb::runtime
