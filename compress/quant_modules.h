#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <string>

/// The modules of Distiller's quantization-aware training, and the names the quantizers, the
/// checkpoint and the op table share (keep them exactly):
///
/// Activations go into core/activation.h's slot, e.g.
/// `act->replace(AnyModule(DorefaActQuant(options)))`, only for ActivationKind::kReLU (Distiller
/// replaces nn.ReLU only). The child is named `replacement`, so a PACT α is
/// `<relu>.replacement.clip_val` (select it by the `clip_val` suffix, as Distiller does). Each slot
/// module ends in aten::fake_quantize_per_tensor_affine (zero point 0) after an aten::clamp, which
/// is what the trace and the op table see (above kMaxRoundedBits bits the clamp alone):
/// - DorefaActQuant (Distiller's ClippedLinearQuantization(bits, clip_val=1)): clamp(x, 0, 1), then
///   the grid {0, 1/n, …, 1}, n = 2^bits − 1. No parameters, no buffers.
/// - PactActQuant (LearnedClippedLinearQuantization): parameter `clip_val` (α, shape [1]);
///   relu and min(·, α) (pact_clip in training, plain clamp(x, 0, α) under no-grad or eval), then
///   the grid with S = α/n.
/// - FakeQuantRelu (FakeQuantizationWrapper(ReLU) around a FakeLinearQuantization): relu, then
///   FakeLinearQuant's clamp and grid. SYMMETRIC: clamp(−m, m) and the grid [−n, n] with S = m/n,
///   n = 2^(bits−1) − 1, m = max(|tracked_min|, |tracked_max|). ASYMMETRIC_*: clamp(tracked_min,
///   tracked_max) and the grid [0, 2^bits − 1] over [min(tracked_min, 0), max(tracked_max, 0)].
///   Buffers as Distiller's, on the module itself: `ema_decay` (0-dim), `tracked_min_biased`,
///   `tracked_min`, `tracked_max_biased`, `tracked_max`, `iter_count`, `scale` (Distiller's
///   scale = 1/S: n/m; 1 at start), `zero_point` (Distiller's: 0 for SYMMETRIC), all float32 of
///   shape [1]. Updated in training mode only; an eval forward changes no buffer.
/// - FakeLinearQuant: the same without the relu (Distiller's `inputs_quant` of the model input);
///   in an asymmetric mode on a range below 0 its zero point is not 0.
///
/// Weights are quantized in place (QuantizedParam): the module keeps its `weight` (and `bias`)
/// parameter, which holds Wq between steps, and gains the buffers `float_weight` (the float master
/// the optimizer steps), `weight_scale` (float32, the Q/DQ scale S: [size(0)] per channel or [1])
/// and `weight_bits` (int64, 0-dim); for a quantized bias `float_bias`, `bias_scale`, `bias_bits`.
/// Wq = q·S with integer q and zero point 0 for DoReFa and the symmetric mode (what a Q/DQ export
/// writes); in the asymmetric mode Wq = round(W/S)·S as well, but q needs Distiller's zero point
/// to fit 2^bits levels, and none is stored (TensorRT runs symmetric grids only).
namespace igb::compress {

/// Options of DorefaActQuant.
struct DorefaActQuantOptions {
  /* implicit */ DorefaActQuantOptions(int64_t bits) : bits_(bits) {}
  /// Bits of the activation grid on [0, 1] (≥ 1; above kMaxRoundedBits only the clamp applies).
  TORCH_ARG(int64_t, bits);
};

/// DoReFa activation quantization, replacing a ReLU: y = round(clamp(x, 0, 1)·n)/n. Gradient:
/// clamp's mask (1 on [0, 1], both ends included), straight-through rounding.
class DorefaActQuantImpl : public torch::nn::Module {
 public:
  explicit DorefaActQuantImpl(DorefaActQuantOptions options);
  at::Tensor forward(const at::Tensor& x);
  const DorefaActQuantOptions& options() const { return options_; }

 private:
  DorefaActQuantOptions options_;
};
TORCH_MODULE(DorefaActQuant);

/// Options of PactActQuant.
struct PactActQuantOptions {
  /* implicit */ PactActQuantOptions(int64_t bits) : bits_(bits) {}
  /// Bits of the activation grid on [0, α] (≥ 1; above kMaxRoundedBits only the clip applies).
  TORCH_ARG(int64_t, bits);
  /// Initial clipping value α (Distiller's act_clip_init_val). Default 8.
  TORCH_ARG(double, init_alpha) = 8.0;
};

/// PACT activation quantization, replacing a ReLU: y = round(min(relu(x), α)·n/α)·α/n with the
/// learned α registered as parameter `clip_val`. Gradients: dx = g where 0 < x < α; dα = Σ g
/// where relu(x) ≥ α (the rounding is straight-through and its scale n/α a constant, as in
/// Distiller). α ≤ 0 is clamped to kPactMinAlpha in the forward pass.
class PactActQuantImpl : public torch::nn::Module {
 public:
  explicit PactActQuantImpl(PactActQuantOptions options);
  at::Tensor forward(const at::Tensor& x);
  const PactActQuantOptions& options() const { return options_; }

  /// α, shape [1].
  at::Tensor clip_val;

 private:
  PactActQuantOptions options_;
};
TORCH_MODULE(PactActQuant);

/// Distiller's LinearQuantMode for activations.
enum class LinearQuantMode {
  /// Restricted symmetric grid [−(2^(bits−1) − 1), 2^(bits−1) − 1] over [−m, m], zero point 0
  /// (Distiller's SYMMETRIC and SYMMETRIC_RESTRICTED; the one TensorRT runs).
  kSymmetric,
  /// Grid [0, 2^bits − 1] over the range widened to include 0, integral zero point.
  kAsymmetricUnsigned,
  /// As kAsymmetricUnsigned, with Distiller's zero_point buffer shifted by 2^(bits−1) (same
  /// dequantized values).
  kAsymmetricSigned,
};

/// Options of FakeLinearQuant and FakeQuantRelu.
struct FakeLinearQuantOptions {
  /* implicit */ FakeLinearQuantOptions(int64_t bits) : bits_(bits) {}
  /// Bits of the activation grid (≥ 2 for kSymmetric, ≥ 1 otherwise; above kMaxRoundedBits only
  /// the clamp applies).
  TORCH_ARG(int64_t, bits);
  /// Decay of the exponential moving averages of the batch minimum and maximum. Default 0.999.
  TORCH_ARG(double, ema_decay) = 0.999;
  /// The grid. Default kSymmetric.
  TORCH_ARG(LinearQuantMode, mode) = LinearQuantMode::kSymmetric;
};
using FakeQuantReluOptions = FakeLinearQuantOptions;

/// Range-linear QAT of a tensor (Distiller's FakeLinearQuantization): in training mode the EMAs of
/// the batch's global min and max are updated with bias correction and `scale`/`zero_point`
/// recomputed; then the clamp and the grid of the mode, with the stored range in evaluation.
/// Gradient: straight-through inside the clamp range. The asymmetric grid saturates at 2^bits − 1
/// (Distiller, which does not clamp the integer, can reach one more level when its rounded zero
/// point shifts the grid; only for ranges below 0, never after a ReLU).
class FakeLinearQuantImpl : public torch::nn::Module {
 public:
  explicit FakeLinearQuantImpl(FakeLinearQuantOptions options);
  at::Tensor forward(const at::Tensor& x);
  const FakeLinearQuantOptions& options() const { return options_; }
  /// m = max(|tracked_min|, |tracked_max|), the magnitude of the tracked range.
  double range() const;
  /// The Q/DQ scale S: m/n (symmetric) or (max(tracked_max, 0) − min(tracked_min, 0))/n
  /// (asymmetric); 1 while the range is 0.
  double quant_scale() const;
  /// The Q/DQ zero point (ONNX convention, x = (q − z)·S): 0 for kSymmetric, else
  /// −round(min(tracked_min, 0)/S), in [0, 2^bits − 1].
  int64_t quant_zero_point() const;

  at::Tensor ema_decay, tracked_min_biased, tracked_min, tracked_max_biased, tracked_max,
      iter_count, scale, zero_point;

 protected:
  /// forward of x, or of relu(x) when `relu_first`. In training mode with grad mode on, on a
  /// contiguous float32 CPU input, through fused_clamp_fake_quant (the batch range from one
  /// aminmax pass); otherwise (evaluation, no-grad, tracing, bfloat16, CUDA) the composition of
  /// ATen ops. Both give the same values, gradients and buffers bit for bit.
  at::Tensor quantize(const at::Tensor& x, bool relu_first);

 private:
  /// One training update: iter_count, the EMAs of the batch range, scale and zero_point.
  void update_range(const at::Tensor& batch_min, const at::Tensor& batch_max);

  FakeLinearQuantOptions options_;
};
TORCH_MODULE(FakeLinearQuant);

/// Range-linear QAT of a ReLU's output (Distiller's FakeQuantizationWrapper(ReLU)): relu, then
/// FakeLinearQuant's update, clamp and grid (buffers on this module).
class FakeQuantReluImpl : public FakeLinearQuantImpl {
 public:
  explicit FakeQuantReluImpl(FakeQuantReluOptions options) : FakeLinearQuantImpl(options) {}
  at::Tensor forward(const at::Tensor& x);
};
TORCH_MODULE(FakeQuantRelu);

/// How a parameter is fake-quantized.
enum class ParamQuantMethod {
  /// DoReFa (DorefaQuantizer, PACTQuantizer): dorefa_quantize, scale dorefa_scale.
  kDorefa,
  /// Symmetric range-linear (QuantAwareTrainRangeLinearQuantizer, SYMMETRIC):
  /// symmetric_fake_quant with symmetric_scale.
  kSymmetric,
  /// Asymmetric range-linear (QuantAwareTrainRangeLinearQuantizer, ASYMMETRIC_*):
  /// symmetric_fake_quant with asymmetric_scale (the zero point cancels in Distiller's QAT).
  kAsymmetric,
};

/// A parameter trained through a float master copy (Distiller's train_with_fp_copy), quantized in
/// place so the module and every handle to the parameter stay as they are:
///
///   auto qp = QuantizedParam::prepare(*conv, "weight", 4, ParamQuantMethod::kDorefa, false);
///   // forward/backward use Wq; then, in the training hooks:
///   qp.before_step();  // weight.grad = J_Qᵀ·grad, weight = master: the optimizer steps the master
///   optimizer.step();
///   qp.after_step();   // float_weight = weight, weight = Q(float_weight), scale refreshed
class QuantizedParam {
 public:
  /// Registers `float_<param>`, `<param>_scale`, `<param>_bits` on `module` (or adopts them when
  /// the module was prepared already, e.g. rebuilt from a checkpoint: InputError when its bits
  /// differ) and writes Q(master) into the parameter. `param` is "weight" or "bias";
  /// `per_channel` applies to the range-linear methods only. bits ≥ 1 (≥ 2 for kSymmetric).
  static QuantizedParam prepare(torch::nn::Module& module, const std::string& param, int64_t bits,
                                ParamQuantMethod method, bool per_channel);

  /// Q(master) with gradient to `master` (the quantization function of this parameter).
  at::Tensor quantize_value(const at::Tensor& master) const;
  /// The Q/DQ scale of Q(master) (the value the scale buffer holds).
  at::Tensor scale_value(const at::Tensor& master) const;
  /// Writes Q(master) into the parameter and refreshes the scale buffer.
  void quantize();
  /// Before the optimizer step: the parameter's gradient (taken at Wq) becomes J_Qᵀ·grad
  /// (identity for kSymmetric, kAsymmetric and DoReFa k = 1), and the parameter gets the master's
  /// values.
  void before_step();
  /// After the optimizer step (and any masks): the master takes the stepped values, the parameter
  /// Q(master).
  void after_step();

  const std::string& name() const { return name_; }
  int64_t bits() const { return bits_; }
  ParamQuantMethod method() const { return method_; }
  bool per_channel() const { return per_channel_; }

  /// The module's parameter (Wq between steps), its float master, scale and bits buffers.
  at::Tensor param, master, scale, bits_buffer;

 private:
  QuantizedParam() = default;
  std::string name_;
  int64_t bits_ = 0;
  ParamQuantMethod method_ = ParamQuantMethod::kDorefa;
  bool per_channel_ = false;
};

}  // namespace igb::compress
