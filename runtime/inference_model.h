#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace igb::graph {
class SummaryGraph;
}  // namespace igb::graph

namespace igb::runtime {

class Plan;

/// One step of a compiled plan: a oneDNN primitive standing for one op or a fused chain of ops, a
/// layout change, or one LibTorch operator the runtime has no oneDNN form for.
struct StepInfo {
  /// The op it computes ("layer1.0.conv1"; for a layout change, the value's producer).
  std::string name;
  /// What runs: "Conv+BatchNorm+Add+ReLU", "MaxPool", "Reorder", or the LibTorch operator
  /// ("aten::flatten").
  std::string kind;
  /// Names of the summary-graph ops it computes, in order (several for a fused chain).
  std::vector<std::string> ops;
  /// oneDNN (true) or LibTorch's operator (false).
  bool native = false;
  /// Multiply-accumulates of the ops it computes (graph/'s convention).
  int64_t macs = 0;
  /// A layer computed in integers (8-bit input and weights, 32-bit sums; InferenceOptions::int8).
  bool int8 = false;
  /// An integer layer computed by LibTorch's QNNPACK kernel (Int8Engine::kQnnpack), not oneDNN's.
  bool qnnpack = false;
  /// An integer layer whose pairs of products could saturate on this CPU (no VNNI), run on its
  /// input split into two halves of at most 128 (twice the sums, exact; runtime/int8_pairs.h).
  bool int8_split = false;
  /// The oneDNN implementation a primitive step runs ("brgconv:avx512_core", "jit_1x1:avx2";
  /// "ref:any" is the reference kernel no CPU-specific kernel replaced); empty for other steps.
  std::string implementation;
};

/// The ISA oneDNN dispatches to here (`dnnl::get_effective_cpu_isa()`, which
/// ONEDNN_MAX_CPU_ISA caps) and whether its u8×s8 products saturate in pairs (docs/int8.md).
struct Int8Isa {
  /// "AVX2", "AVX-512 VNNI", …
  std::string name;
  /// No VNNI: two products are added in a saturating 16-bit lane, and an s8 input halves the
  /// weights; integer layers that could go wrong so run on a split input (StepInfo::int8_split).
  bool pairs_saturate = true;
};
const Int8Isa& int8_isa();

/// Whose kernels compute the integer layers of an INT8 inference form.
enum class Int8Engine {
  /// Both below, timed on the plan's input shape when it is compiled; the faster is kept.
  kAuto,
  /// oneDNN's u8/s8 convolutions and inner products, driven directly: residual adds, ReLUs and
  /// clamps fused, every layer's output rounded once.
  kOneDnn,
  /// LibTorch's QNNPACK kernels (quantized::conv2d, quantized::add) on NHWC tensors: the engine
  /// of ARM CPUs. A residual layer's output is rounded to its step (within ±128 steps) before
  /// the add, so it may differ from oneDNN's by one step. Layers QNNPACK cannot take (a float
  /// output, a post-op other than an add, ReLU or clamp) stay with oneDNN.
  kQnnpack,
};

/// How an inference form is made.
struct InferenceOptions {
  /// Fold BatchNorm into the convolution or linear layer before it and fuse activations and
  /// residual adds into the layer as oneDNN post-ops. Off: each op is its own step (the same
  /// kernels, for measuring what fusion gives).
  bool fuse = true;
  /// Run supported ops with oneDNN. Off: every op runs as LibTorch's operator, node by node.
  bool native = true;
  /// For each 3x3 stride-1 convolution, time oneDNN's direct and Winograd kernels once when the
  /// plan is made and keep the faster (ResNet-18's 224x224 convolutions: 1.35x faster with
  /// Winograd on AVX-512; ResNet-20's 32x32 ones slower). Off: direct kernels only.
  bool pick_algorithms = true;
  /// Run quantized layers in integers: a convolution or linear layer whose input is the output of
  /// a fake quantization (an 8-bit grid with zero point 0) and whose weights lie on an integer
  /// grid (a quantizer's) runs as oneDNN's u8/s8 kernel with 32-bit sums, BatchNorm folded into
  /// its per-channel output scales, and writes its output on the grid of the fake quantization
  /// after it (8-bit) or in float32 when none follows. The scales and grids are the model's own:
  /// the output equals the fake-quantized model's up to a rounding flipped by float arithmetic
  /// (one step of a grid). Everything else runs as in float32 on the dequantized values.
  bool int8 = false;
  /// Whose integer kernels run the INT8 layers.
  Int8Engine int8_engine = Int8Engine::kAuto;
  /// Plans kept, one per input shape; the least recently used is dropped beyond this.
  int max_plans = 8;
};

/// The inference form of a model: its forward pass compiled once per input shape into a flat
/// list of oneDNN primitives, weights pre-packed in the layout each kernel wants, BatchNorm folded
/// into the layer before it, activations and residual adds fused as post-ops, activations kept in
/// oneDNN's blocked layout between ops and in one arena reused across calls; whatever oneDNN has
/// no form for runs as the traced LibTorch operator. No autograd state. Its output equals the
/// model's within float rounding (1e-5 relative, tests/runtime).
///
///   auto form = InferenceModel::make(model, [&](auto& x) { return model->forward(x); });
///   auto y = form->forward(x);          // any batch and spatial size: one plan per shape
///
/// The form holds the model and reads its weights when it compiles a plan: change the weights
/// and make a new form. forward() is safe to call from several threads (one runs at a time).
class InferenceModel {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;

  /// `forward` is the model's eval forward pass (traced once per input shape; it must not
  /// depend on the values of its input). `name` appears in errors.
  static std::shared_ptr<InferenceModel> make(std::shared_ptr<torch::nn::Module> model,
                                              Forward forward, const std::string& name = "model",
                                              const InferenceOptions& options = {});
  ~InferenceModel();

  /// The model's output for `x` (float32, on the CPU), a fresh tensor. The first call for a
  /// shape compiles its plan (a trace and oneDNN's primitive creation: milliseconds to a
  /// second); InputError when the model cannot be traced on it.
  at::Tensor forward(const at::Tensor& x);

  /// Compiles the plan for `input_shape` now, without running it.
  void prepare(const std::vector<int64_t>& input_shape);

  /// The steps of the plan for `input_shape` (compiled if needed), in execution order.
  std::vector<StepInfo> steps(const std::vector<int64_t>& input_shape);

  /// Median time in milliseconds of each step of the plan for `x`'s shape over `repeats` runs
  /// after one untimed one, parallel to steps().
  std::vector<double> time_steps(const at::Tensor& x, int repeats);

  /// "23 steps: 19 oneDNN (20 convolutions, 19 BatchNorms folded, 17 activations and 9 adds
  /// fused), 4 LibTorch (aten::flatten, ...)" for the plan of `input_shape`.
  std::string summary(const std::vector<int64_t>& input_shape);

  /// With InferenceOptions::int8: whose kernels compute the integer layers of the plan for
  /// `input_shape`, and why ("oneDNN, timed faster (oneDNN 0.190 ms, QNNPACK 1.210 ms)").
  std::string int8_engine(const std::vector<int64_t>& input_shape);

  const std::string& name() const { return name_; }
  const InferenceOptions& options() const { return options_; }

 private:
  InferenceModel(std::shared_ptr<torch::nn::Module> model, Forward forward, std::string name,
                 const InferenceOptions& options);
  Plan& plan_for(const std::vector<int64_t>& shape);

  std::shared_ptr<torch::nn::Module> model_;
  Forward forward_;
  std::string name_;
  InferenceOptions options_;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, std::unique_ptr<Plan>> plans_;
  std::map<std::vector<int64_t>, uint64_t> last_used_;
  uint64_t clock_ = 0;
};

/// The inference form of one part of a traced forward pass: a partition stage, an early-exit
/// segment, a serving worker's share. Compiled once, for the summary graph's input shape.
///
///   InferenceStage stage(graph, {ops...}, {inputs...}, {outputs...});
///   std::map<int, at::Tensor> values = {{input_id, x}};
///   if (!stage.run(values)) ...  // another shape: run the stage some other way
class InferenceStage {
 public:
  /// `ops`: the summary-graph op ids it runs; `inputs`: the value ids it is given (the model's
  /// input is given too); `outputs`: the value ids it returns. `graph` need not outlive it.
  InferenceStage(const graph::SummaryGraph& graph, const std::vector<int>& ops,
                 const std::vector<int>& inputs, const std::vector<int>& outputs,
                 const InferenceOptions& options = {});
  ~InferenceStage();
  /// Adds the stage's outputs to `values`, which holds its inputs; false, running nothing, when
  /// an input is missing or not the float32 CPU tensor of the shape the stage was made for.
  bool run(std::map<int, at::Tensor>& values);
  std::vector<StepInfo> steps() const;

 private:
  std::unique_ptr<Plan> plan_;
  std::mutex mutex_;
};

}  // namespace igb::runtime
