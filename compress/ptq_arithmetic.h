#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "compress/quant_modules.h"
#include "compress/quant_stats.h"

/// The arithmetic of post-training quantization (compress/post_train_quantizer.h): activation
/// ranges from statistics, and weights and biases quantized in place, as Distiller's
/// range_linear.py computes them.
namespace igb::compress {

/// LinearQuantMode (compress/quant_modules.h) is Distiller's; post-training activations use the
/// full signed range [−2^(bits−1), 2^(bits−1) − 1] in SYMMETRIC mode, as Distiller's
/// RangeLinearQuantWrapper does.
/// Distiller's ClipMode: the range of an activation from its statistics.
enum class ClipMode {
  /// min / max over all calibration values.
  kNone,
  /// avg_min / avg_max (the per-sample minima and maxima averaged).
  kAvg,
  /// min / max narrowed to mean ± clip_n_stds·std.
  kNStd,
};

std::string mode_name(LinearQuantMode mode);
std::string clip_name(ClipMode clip);

/// One activation's quantization: the grid step S (Distiller's scale is 1/S), the ONNX zero point
/// z and the integer range of a 2^bits grid; y = (clamp(round(x/S) + z, 0, 2^bits − 1) − z)·S.
/// SYMMETRIC: z = 2^(bits−1) (the signed range [−2^(bits−1), 2^(bits−1) − 1] with zero 0);
/// asymmetric modes: z = −round(min·/S) (the signed variant shifts q and its zero point alike, so
/// the dequantized values are the unsigned ones).
struct ActQuant {
  double scale = 1;
  int64_t zero_point = 0;
  int64_t bits = 0;
  bool enabled() const { return bits > 0; }
  at::Tensor apply(const at::Tensor& x) const;
};

/// Distiller's _get_quant_params_from_stats_dict: the range from the record (avg_ keys for AVG;
/// N_STD: min/max narrowed to mean ± n_stds·std); SYMMETRIC: sat = max(|lo|, |hi|), scale =
/// (2^(bits−1) − 1)/sat; asymmetric: [min(lo, 0), max(hi, 0)] onto 2^bits − 1 steps with zero
/// point round(scale·lo); a zero range gives scale 1. Scales in float32 as Distiller's tensors.
ActQuant act_quant_from_stats(const QuantStatsRecord& r, int64_t bits, LinearQuantMode mode,
                              ClipMode clip, double n_stds);

/// Quantizes a weight as RangeLinearQuantParamLayerWrapper does, in float: SYMMETRIC per output
/// channel (per_channel, 2-D and 4-D weights) or per tensor, Wq = round(W/S)·S with
/// S = amax/(2^(bits−1) − 1) (compress/fake_quant.h); asymmetric modes: S = range/(2^bits − 1)
/// over [min(W, 0), max(W, 0)], q = clamp(round(W/S) + z, 0, 2^bits − 1), Wq = (q − z)·S. Returns
/// Wq; `scale` receives S (shape [C_out] or [1]).
at::Tensor quantize_weight_ptq(const at::Tensor& w, int64_t bits, LinearQuantMode mode,
                               bool per_channel, at::Tensor* scale);
/// The bias on the accumulator grid S_acc = S_in·S_w (per channel when S_w is):
/// clamp(round(b/S_acc), −2^(bits−1), 2^(bits−1) − 1)·S_acc.
at::Tensor quantize_bias_ptq(const at::Tensor& b, double input_scale, const at::Tensor& w_scale,
                             int64_t accum_bits);

}  // namespace igb::compress
