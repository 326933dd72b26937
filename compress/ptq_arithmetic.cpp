#include "compress/ptq_arithmetic.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "compress/fake_quant.h"
#include "compress/quantizer.h"

namespace igb::compress {

std::string mode_name(LinearQuantMode mode) {
  switch (mode) {
    case LinearQuantMode::kSymmetric:
      return "SYMMETRIC";
    case LinearQuantMode::kAsymmetricUnsigned:
      return "ASYMMETRIC_UNSIGNED";
    case LinearQuantMode::kAsymmetricSigned:
      return "ASYMMETRIC_SIGNED";
  }
  return "?";
}

std::string clip_name(ClipMode clip) {
  switch (clip) {
    case ClipMode::kNone:
      return "NONE";
    case ClipMode::kAvg:
      return "AVG";
    case ClipMode::kNStd:
      return "N_STD";
  }
  return "?";
}

at::Tensor ActQuant::apply(const at::Tensor& x) const {
  if (!enabled()) return x;
  return fake_quant_affine(x, scale, zero_point, bits);
}

ActQuant act_quant_from_stats(const QuantStatsRecord& r, int64_t bits, LinearQuantMode mode,
                              ClipMode clip, double n_stds) {
  ActQuant q;
  if (bits == QuantBits::kFloat) return q;
  q.bits = bits;
  float lo = static_cast<float>(clip == ClipMode::kAvg ? r.avg_min : r.min);
  float hi = static_cast<float>(clip == ClipMode::kAvg ? r.avg_max : r.max);
  if (clip == ClipMode::kNStd) {
    lo = std::max(lo, static_cast<float>(r.mean - n_stds * r.std));
    hi = std::min(hi, static_cast<float>(r.mean + n_stds * r.std));
  }
  if (mode == LinearQuantMode::kSymmetric) {
    const float n = static_cast<float>((int64_t{1} << (bits - 1)) - 1);
    float sat = std::max(std::fabs(lo), std::fabs(hi));
    if (sat == 0) sat = n;
    const float scale = n / sat;  // Distiller's scale, float32
    q.scale = 1.0 / static_cast<double>(scale);
    q.zero_point = int64_t{1} << (bits - 1);
    return q;
  }
  const float n = static_cast<float>((int64_t{1} << bits) - 1);
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  float diff = hi - lo;
  if (diff == 0) diff = n;
  const float scale = n / diff;
  q.scale = 1.0 / static_cast<double>(scale);
  q.zero_point = -static_cast<int64_t>(std::nearbyint(scale * lo));
  return q;
}

at::Tensor quantize_weight_ptq(const at::Tensor& w, int64_t bits, LinearQuantMode mode,
                               bool per_channel, at::Tensor* scale) {
  at::NoGradGuard no_grad;
  const at::Tensor wd = w.detach();
  if (mode == LinearQuantMode::kSymmetric) {
    at::Tensor s = symmetric_scale(wd, bits, per_channel);
    if (scale) *scale = s;
    return symmetric_fake_quant(wd, s, bits);
  }
  const bool per_ch = per_channel && (wd.dim() == 2 || wd.dim() == 4);
  at::Tensor s = asymmetric_scale(wd, bits, per_channel);
  const at::Tensor flat = per_ch ? wd.reshape({wd.size(0), -1}) : wd.reshape({1, -1});
  const at::Tensor lo = std::get<0>(flat.min(1)).clamp_max(0).to(at::kFloat);
  std::vector<int64_t> view(wd.dim(), 1);
  if (per_ch) view[0] = wd.size(0);
  const at::Tensor sv = s.to(wd.device()).reshape(view);
  const at::Tensor z = (-(lo.to(wd.device()) / s.to(wd.device()))).round().reshape(view);
  const double n = static_cast<double>((int64_t{1} << bits) - 1);
  const at::Tensor q = ((wd / sv).round() + z).clamp(0, n);
  if (scale) *scale = s;
  return ((q - z) * sv).to(wd.scalar_type());
}

at::Tensor quantize_bias_ptq(const at::Tensor& b, double input_scale, const at::Tensor& w_scale,
                             int64_t accum_bits) {
  at::NoGradGuard no_grad;
  const at::Tensor acc = (w_scale.to(b.device()).to(at::kFloat) * input_scale).reshape({-1});
  const double lim = std::ldexp(1.0, static_cast<int>(accum_bits - 1));
  return ((b.detach() / acc).round().clamp(-lim, lim - 1) * acc).to(b.scalar_type());
}

}  // namespace igb::compress
