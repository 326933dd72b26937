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
/// Activations go into core/activation.h's slot, `act->replace(AnyModule(XxxActQuant(...)))`,
/// only for ActivationKind::kReLU (Distiller replaces nn.ReLU only). The child is named
/// `replacement`, so a PACT α is `<relu>.replacement.clip_val` (select it by the `clip_val`
/// suffix, as Distiller does). Each slot module ends in aten::fake_quantize_per_tensor_affine
/// (zero point 0) after an aten::clamp, which is what the trace and the op table see:
/// - DorefaActQuant (Distiller's ClippedLinearQuantization(bits, clip_val=1)): clamp(x, 0, 1), then
///   the grid {0, 1/n, …, 1}, n = 2^bits − 1. No parameters, no buffers.
/// - PactActQuant (LearnedClippedLinearQuantization): parameter `clip_val` (α, shape [1]);
///   relu and min(·, α) (pact_clip in training, plain clamp(x, 0, α) under no-grad or eval), then
///   the grid with S = α/n.
/// - FakeQuantRelu (FakeQuantizationWrapper(ReLU) around a SYMMETRIC FakeLinearQuantization):
///   relu, then clamp(−m, m) and the grid [−n, n] with S = m/n, n = 2^(bits−1) − 1,
///   m = max(|tracked_min|, |tracked_max|). Buffers as Distiller's: `ema_decay` (0-dim),
///   `tracked_min_biased`, `tracked_min`, `tracked_max_biased`, `tracked_max`, `iter_count`,
///   `scale` (= 1/S, Distiller's scale: n/m; 1 at start), `zero_point` (0), all float32 of shape
///   [1]. Updated in training mode only; an eval forward changes no buffer.
///
/// Weights are quantized in place (QuantizedParam): the module keeps its `weight` (and `bias`)
/// parameter, which holds Wq between steps, and gains the buffers `float_weight` (the float master
/// the optimizer steps), `weight_scale` (float32, the Q/DQ scale S: [size(0)] per channel or [1])
/// and `weight_bits` (int64, 0-dim); for a quantized bias `float_bias`, `bias_scale`, `bias_bits`.
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

/// Options of FakeQuantRelu.
struct FakeQuantReluOptions {
  /* implicit */ FakeQuantReluOptions(int64_t bits) : bits_(bits) {}
  /// Bits of the symmetric activation grid (≥ 2; above kMaxRoundedBits only the clamp applies).
  TORCH_ARG(int64_t, bits);
  /// Decay of the exponential moving averages of the batch minimum and maximum. Default 0.999.
  TORCH_ARG(double, ema_decay) = 0.999;
};

/// Range-linear QAT of a ReLU's output (Distiller's FakeQuantizationWrapper(ReLU) with a
/// SYMMETRIC FakeLinearQuantization): y = relu(x); in training mode the EMAs of the batch's global
/// min and max are updated with bias correction and `scale` recomputed; then clamp(y, −m, m) and
/// the symmetric grid with S = m/n. Gradient: straight-through inside [−m, m].
class FakeQuantReluImpl : public torch::nn::Module {
 public:
  explicit FakeQuantReluImpl(FakeQuantReluOptions options);
  at::Tensor forward(const at::Tensor& x);
  const FakeQuantReluOptions& options() const { return options_; }
  /// m = max(|tracked_min|, |tracked_max|), the clamp range of the last forward.
  double range() const;
  /// The Q/DQ scale S = m/n (1 while m is 0).
  double quant_scale() const;

  at::Tensor ema_decay, tracked_min_biased, tracked_min, tracked_max_biased, tracked_max,
      iter_count, scale, zero_point;

 private:
  FakeQuantReluOptions options_;
};
TORCH_MODULE(FakeQuantRelu);

/// How a parameter is fake-quantized.
enum class ParamQuantMethod {
  /// DoReFa (DorefaQuantizer, PACTQuantizer): dorefa_quantize, scale dorefa_scale.
  kDorefa,
  /// Symmetric range-linear (QuantAwareTrainRangeLinearQuantizer): symmetric_fake_quant.
  kSymmetric,
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
  /// `per_channel` applies to kSymmetric only. bits ≥ 1 (≥ 2 for kSymmetric).
  static QuantizedParam prepare(torch::nn::Module& module, const std::string& param, int64_t bits,
                                ParamQuantMethod method, bool per_channel);

  /// Q(master) with gradient to `master` (the quantization function of this parameter).
  at::Tensor quantize_value(const at::Tensor& master) const;
  /// Writes Q(master) into the parameter and refreshes the scale buffer.
  void quantize();
  /// Before the optimizer step: the parameter's gradient (taken at Wq) becomes J_Qᵀ·grad
  /// (identity for kSymmetric and DoReFa k = 1), and the parameter gets the master's values.
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
