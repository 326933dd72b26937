#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

/// Fake-quantization arithmetic of Distiller's quantization-aware training (DoReFa, PACT and
/// QuantAwareTrainRangeLinearQuantizer): quantize-dequantize in float32 with straight-through
/// gradients. The modules that use it (activation replacements, the weights' float copies) are in
/// compress/quant_modules.h.
///
/// Rounding is half-to-even (torch.round, std::nearbyint), as ONNX QuantizeLinear and TensorRT.
/// Every quantized value is written as q·S with the integer q and a float32 scale S, which is
/// exactly what an exported DequantizeLinear computes, so exported and trained values agree bit for
/// bit:
/// - DoReFa weights: q = 2j − n (j = round(n·u)), S = float32(1/n), Wq = q·S.
/// - Symmetric (range-linear) weights: S = float32(amax / (2^(b−1) − 1)), Wq = round(W / S)·S
///   (the ONNX form; Distiller's round(W·s)/s with s = 1/S is at most one ulp away).
/// - Activations go through ATen's `fake_quantize_per_tensor_affine` (double-scale overload),
///   which computes round(x·float32(1/S))·S, clamped to [quant_min, quant_max].
namespace igb::compress {

/// Above this many bits the quantization grid is finer than float32 resolution near 1, so the
/// rounding is skipped (the clamp and DoReFa's tanh normalisation still apply). Distiller's
/// default of 32 bits therefore still replaces ReLUs with clamp(0, 1).
constexpr int64_t kMaxRoundedBits = 16;

/// Levels of an unsigned grid on [0, 1]: 2^bits − 1 (DoReFa, PACT). bits ≥ 1.
int64_t unsigned_levels(int64_t bits);
/// Largest integer of a restricted symmetric grid: 2^(bits−1) − 1 (127 for 8 bits). bits ≥ 2.
int64_t symmetric_levels(int64_t bits);

/// round(x) half-to-even in the forward pass, identity gradient (Distiller's LinearQuantizeSTE).
at::Tensor round_ste(const at::Tensor& x);

/// DoReFa weights, k = bits ≥ 2 (Distiller's dorefa_quantize_param): t = tanh(W),
/// u = t / (2·max|t|) + 0.5 (max over the whole tensor), j = round(n·u), Wq = (2j − n)/n with
/// n = 2^k − 1. Differentiable: the gradient flows through tanh and the normalisation (max|t|
/// included); only the rounding is straight-through. max|t| = 0 (an all-zero tensor) returns
/// zeros instead of Distiller's division by zero. k > kMaxRoundedBits: Wq = 2u − 1 unrounded.
at::Tensor dorefa_weight(const at::Tensor& w, int64_t bits);
/// DoReFa weights, k = 1 (Distiller's DorefaParamsBinarizationSTE): E = mean|W|,
/// Wq = E·(W == 0 ? 1 : sign(W)); the gradient is the identity (E treated as a constant).
at::Tensor dorefa_binary(const at::Tensor& w);
/// dorefa_binary for bits == 1, else dorefa_weight.
at::Tensor dorefa_quantize(const at::Tensor& w, int64_t bits);
/// The Q/DQ scale of DoReFa weights as a float32 tensor of shape [1]: 1/n for bits ≥ 2,
/// mean|W| for bits == 1 (1 when that is 0).
at::Tensor dorefa_scale(const at::Tensor& w, int64_t bits);

/// Symmetric scale S = amax / (2^(bits−1) − 1), float32, from the detached tensor: per output
/// channel (shape [size(0)], amax over all other dimensions) when `per_channel` and w has 2 or 4
/// dimensions (Distiller's rule), else per tensor (shape [1]). amax = 0 gives S = 1.
at::Tensor symmetric_scale(const at::Tensor& w, int64_t bits, bool per_channel);
/// Asymmetric scale S = (max(max W, 0) − min(min W, 0)) / (2^bits − 1), float32, per output
/// channel or per tensor as symmetric_scale; a zero range gives S = 1 (Distiller's
/// asymmetric_linear_quantization_params). Distiller's QAT does not clamp the integers, so the
/// integral zero point cancels and the dequantized weights are round(W / S)·S as well: use
/// symmetric_fake_quant with this scale.
at::Tensor asymmetric_scale(const at::Tensor& w, int64_t bits, bool per_channel);
/// Wq = round(W / S)·S with the scale from symmetric_scale or asymmetric_scale (shape [1], or
/// [size(0)] broadcast along dimension 0); identity gradient. No clamp is needed: |W| ≤ amax. bits
/// > kMaxRoundedBits returns W unchanged.
at::Tensor symmetric_fake_quant(const at::Tensor& w, const at::Tensor& scale, int64_t bits);

/// PACT's learned clipping, y = min(relu(x), α), as a custom autograd function (Distiller's
/// LearnedClippedLinearQuantization without the rounding). Gradients: dx = g where 0 < x < α,
/// dα = Σ g over the elements with relu(x) ≥ α (ties x == α go to α). `alpha` is a one-element
/// tensor; values ≤ 0 are clamped to a small ε in the forward pass.
at::Tensor pact_clip(const at::Tensor& x, const at::Tensor& alpha);
/// The α PACT's forward pass uses: alpha, clamped to at least kPactMinAlpha.
double pact_alpha_value(const at::Tensor& alpha);
constexpr double kPactMinAlpha = 1e-8;

/// Fake quantization onto an unsigned grid, y = round(x / S)·S clamped to [0, n·S], S = range / n,
/// n = 2^bits − 1, through ATen's fake_quantize_per_tensor_affine (so the trace names it).
/// Gradient: straight-through inside the range. x must be float32. bits > kMaxRoundedBits returns
/// x.
at::Tensor fake_quant_unsigned(const at::Tensor& x, double range, int64_t bits);
/// Fake quantization onto the restricted symmetric grid [−n, n], n = 2^(bits−1) − 1, with the
/// given scale S (> 0). Same op and gradient as fake_quant_unsigned.
at::Tensor fake_quant_symmetric(const at::Tensor& x, double scale, int64_t bits);
/// Fake quantization onto the unsigned grid [0, 2^bits − 1] with scale S (> 0) and zero point z
/// (ONNX convention): y = (clamp(round(x/S) + z, 0, 2^bits − 1) − z)·S. Same op and gradient.
at::Tensor fake_quant_affine(const at::Tensor& x, double scale, int64_t zero_point, int64_t bits);

/// The clamp and the fake-quantization grid of one activation slot: ATen's
/// fake_quantize_per_tensor_affine(clamp(x, lo, hi), scale, zero_point, quant_min, quant_max),
/// optionally after a relu.
struct ClampFakeQuantGrid {
  /// Clamp bounds (applied in float32, as at::clamp does).
  double lo = 0, hi = 1;
  /// Q/DQ scale S (> 0; applied as float32, with the inverse 1.0f / float(S), as ATen does).
  double scale = 1;
  int64_t zero_point = 0, quant_min = 0, quant_max = 1;
  /// relu(x) before the clamp (FakeQuantRelu).
  bool relu_first = false;
};

/// Whether the fused training kernels below may replace the composition of ATen ops for x: grad
/// mode is on, no trace is being recorded (a trace must see aten::clamp and
/// aten::fake_quantize_per_tensor_affine, which the op table and the exporter read), and x is a
/// contiguous float32 CPU tensor. Under --amp (bfloat16) and on CUDA the composition runs.
bool fused_fake_quant_applies(const at::Tensor& x);

/// relu (when `relu_first`), clamp and fake quantization in one pass over x, with one byte per
/// element kept for the backward pass, which is one pass too. Values and gradients equal the
/// composition at::relu → at::clamp → at::fake_quantize_per_tensor_affine bit for bit: dx = g where
/// relu's, the clamp's (both ends included) and fake_quantize's masks hold, g·0 where only
/// fake_quantize's fails, +0 elsewhere. Requires fused_fake_quant_applies(x), a finite grid and
/// grid ends below 2^16.
at::Tensor fused_clamp_fake_quant(const at::Tensor& x, const ClampFakeQuantGrid& grid);

/// PACT's training forward, fake_quant_unsigned(pact_clip(x, alpha), α, bits) with
/// α = pact_alpha_value(alpha), in one pass, and its backward in one pass plus the sum for dα:
/// values and both gradients equal the composition bit for bit (dα is at::sum over the same
/// tensor of per-element terms). Requires fused_fake_quant_applies(x) and 1 ≤ bits ≤
/// kMaxRoundedBits.
at::Tensor fused_pact_fake_quant(const at::Tensor& x, const at::Tensor& alpha, int64_t bits);

/// Distiller's update_ema, in place on float32 buffers of one element, all arithmetic in float32
/// tensors as in Distiller (no host synchronisation): biased = biased·d + (1 − d)·value,
/// unbiased = biased / (1 − d^step); `step` (≥ 1) counts the updates including this one.
void update_ema(at::Tensor& biased, at::Tensor& unbiased, const at::Tensor& value,
                const at::Tensor& decay, const at::Tensor& step);

/// Back-propagates `grad` (the gradient at Q(master)) through the quantization function q to the
/// master copy: J_Qᵀ·grad, with q applied to a detached copy of `master` that requires grad. Used
/// when the optimizer steps the float copy of a weight whose forward used Q(master).
at::Tensor weight_grad_through(const std::function<at::Tensor(const at::Tensor&)>& q,
                               const at::Tensor& master, const at::Tensor& grad);

}  // namespace igb::compress
