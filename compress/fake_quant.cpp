#include "compress/fake_quant.h"

#include <ATen/Parallel.h>
#include <torch/autograd.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/error.h"

namespace igb::compress {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_bits(int64_t bits, int64_t min_bits, const char* what) {
  if (bits < min_bits || bits > 62) {
    std::ostringstream msg;
    msg << what << ": " << bits << " bits; valid are " << min_bits << " to 62";
    throw InputError(msg.str());
  }
}

struct RoundSte : public torch::autograd::Function<RoundSte> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x) { return at::round(x); }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0]}; }
};

struct BinarizeSte : public torch::autograd::Function<BinarizeSte> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& w) {
    const at::Tensor e = w.abs().mean();
    return at::where(w == 0, at::ones_like(w), at::sign(w)) * e;
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0]}; }
};

// The scale is a constant of the forward pass (Distiller computes it under no_grad).
struct SymmetricFakeQuantSte : public torch::autograd::Function<SymmetricFakeQuantSte> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& w, const at::Tensor& scale) {
    at::Tensor s = scale.to(w.options());
    if (s.numel() > 1) {
      std::vector<int64_t> shape(static_cast<size_t>(w.dim()), 1);
      shape[0] = s.numel();
      s = s.reshape(shape);
    }
    return at::round(w / s) * s;
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], at::Tensor()};
  }
};

struct PactClip : public torch::autograd::Function<PactClip> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& alpha) {
    const double a = pact_alpha_value(alpha);
    ctx->save_for_backward({x});
    ctx->saved_data["alpha"] = a;
    return at::clamp(x, 0.0, a);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const double a = ctx->saved_data["alpha"].toDouble();
    const at::Tensor& g = grad[0];
    const at::Tensor inside = at::logical_and(x > 0, x < a);
    const at::Tensor dx = g * inside.to(g.scalar_type());
    const at::Tensor dalpha = (g * (x >= a).to(g.scalar_type())).sum().reshape({1});
    return {dx, dalpha};
  }
};

at::Tensor as_float(const at::Tensor& x) {
  return x.scalar_type() == at::kFloat ? x : x.to(at::kFloat);
}

// The fused kernels below must round exactly as ATen's ops do: no multiply-add contraction.
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

constexpr float kTwo23 = 8388608.0f;
constexpr int64_t kFusedGrain = int64_t{1} << 15;

// std::nearbyint in the default rounding mode without a libm call: adding and subtracting 2^23
// rounds |v| < 2^23 to an integer, half to even; larger floats are integers already, NaN stays.
inline float round_half_even(float v) {
  if (!(std::fabs(v) < kTwo23)) return v;
  return v >= 0.0f ? (v + kTwo23) - kTwo23 : (v - kTwo23) + kTwo23;
}

// The per-element arithmetic of ATen's CPU fake_quantize_tensor_cachemask_kernel, the clamp
// bounds as at::clamp converts its scalars.
struct FusedGrid {
  float lo, hi, scale, inv_scale, zero_point, quant_min, quant_max;
};

FusedGrid make_fused_grid(double lo, double hi, double scale, int64_t zero_point, int64_t quant_min,
                          int64_t quant_max) {
  const auto sc = static_cast<float>(scale);
  return {static_cast<float>(lo),
          static_cast<float>(hi),
          sc,
          1.0f / sc,
          static_cast<float>(zero_point),
          static_cast<float>(quant_min),
          static_cast<float>(quant_max)};
}

// Fake quantization of the clamped value c; `in` is the op's gradient mask.
inline float fused_fake_quant(float c, const FusedGrid& p, bool& in) {
  const float qf = round_half_even(c * p.inv_scale) + p.zero_point;
  in = qf >= p.quant_min && qf <= p.quant_max;
  float q = qf > p.quant_min ? qf : p.quant_min;  // NaN → quant_min, as fmax does
  q = q < p.quant_max ? q : p.quant_max;
  return (q - p.zero_point) * p.scale;
}

// The mask byte: bit 0 fake_quantize's mask; bit 1 the clamp's (and relu's) mask, for PACT
// 0 < x < α; bit 2 (PACT) x ≥ α.
enum : uint8_t { kFqMask = 1, kPassMask = 2, kAlphaMask = 4 };

// One element of the forward pass. kRelu: relu(x) first; kPact: clamp(x, 0, α) with PactClip's
// masks (then lo = 0, hi = α).
template <bool kRelu, bool kPact>
inline float clamp_fake_quant_one(float x, const FusedGrid& p, uint8_t& mask) {
  float v = x;
  bool pass = true;
  if (kRelu) {
    v = v < 0.0f ? 0.0f : v;  // at::relu: NaN stays; threshold_backward masks relu(x) ≤ 0
    pass = !(v <= 0.0f);
  }
  pass = kPact ? (x > 0.0f && x < p.hi) : (pass && v >= p.lo && v <= p.hi);
  float c = v < p.lo ? p.lo : v;  // std::min(std::max(v, lo), hi): NaN stays
  c = p.hi < c ? p.hi : c;
  bool in = false;
  const float y = fused_fake_quant(c, p, in);
  mask = static_cast<uint8_t>((in ? kFqMask : 0) | (pass ? kPassMask : 0) |
                              (kPact && x >= p.hi ? kAlphaMask : 0));
  return y;
}

#if defined(__SSE2__)
// Four elements at a time, without branches (the masks are data-dependent), with exactly the
// scalar arithmetic: MAXPS(a, b) is (a > b ? a : b) and MINPS(a, b) is (a < b ? a : b), NaN
// in either giving b, which is how the comparisons above are written.
template <bool kRelu, bool kPact>
int64_t clamp_fake_quant_sse(const float* x, float* y, uint8_t* mask, int64_t n,
                             const FusedGrid& p) {
  const __m128 zero = _mm_setzero_ps(), lo = _mm_set1_ps(p.lo), hi = _mm_set1_ps(p.hi);
  const __m128 inv = _mm_set1_ps(p.inv_scale), sc = _mm_set1_ps(p.scale);
  const __m128 zp = _mm_set1_ps(p.zero_point), qmin = _mm_set1_ps(p.quant_min),
               qmax = _mm_set1_ps(p.quant_max);
  const __m128 two23 = _mm_set1_ps(kTwo23), sign = _mm_set1_ps(-0.0f);
  const __m128i bit_fq = _mm_set1_epi32(kFqMask), bit_pass = _mm_set1_epi32(kPassMask),
                bit_alpha = _mm_set1_epi32(kAlphaMask);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128 xv = _mm_loadu_ps(x + i);
    __m128 v = xv, pass;
    if (kPact) {
      pass = _mm_and_ps(_mm_cmpgt_ps(xv, zero), _mm_cmplt_ps(xv, hi));
    } else {
      if (kRelu) v = _mm_max_ps(zero, v);
      pass = _mm_and_ps(_mm_cmpge_ps(v, lo), _mm_cmple_ps(v, hi));
      if (kRelu) pass = _mm_and_ps(pass, _mm_cmpnle_ps(v, zero));
    }
    const __m128 c = _mm_min_ps(hi, _mm_max_ps(lo, v));
    const __m128 t = _mm_mul_ps(c, inv);
    const __m128 magic = _mm_or_ps(_mm_and_ps(t, sign), two23);  // ±2^23 with t's sign
    const __m128 rounded = _mm_sub_ps(_mm_add_ps(t, magic), magic);
    const __m128 big = _mm_cmpnlt_ps(_mm_andnot_ps(sign, t), two23);  // |t| ≥ 2^23 or NaN
    const __m128 r = _mm_or_ps(_mm_and_ps(big, t), _mm_andnot_ps(big, rounded));
    const __m128 qf = _mm_add_ps(r, zp);
    const __m128 in = _mm_and_ps(_mm_cmpge_ps(qf, qmin), _mm_cmple_ps(qf, qmax));
    const __m128 q = _mm_min_ps(_mm_max_ps(qf, qmin), qmax);
    _mm_storeu_ps(y + i, _mm_mul_ps(_mm_sub_ps(q, zp), sc));
    __m128i m = _mm_or_si128(_mm_and_si128(_mm_castps_si128(in), bit_fq),
                             _mm_and_si128(_mm_castps_si128(pass), bit_pass));
    if (kPact)
      m = _mm_or_si128(m, _mm_and_si128(_mm_castps_si128(_mm_cmpge_ps(xv, hi)), bit_alpha));
    m = _mm_packus_epi16(_mm_packs_epi32(m, m), m);
    const int32_t bytes = _mm_cvtsi128_si32(m);
    std::memcpy(mask + i, &bytes, 4);
  }
  return i;
}

// The backward masks of four elements as 0/1 floats: (mask & bit) ? 1 : 0.
inline __m128 mask_ones(__m128i codes, uint8_t bit) {
  const __m128i b = _mm_set1_epi32(bit);
  return _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(codes, b), b)),
                    _mm_set1_ps(1.0f));
}

inline __m128i load_mask4(const uint8_t* mask) {
  int32_t bytes;
  std::memcpy(&bytes, mask, 4);
  const __m128i z = _mm_setzero_si128();
  return _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), z), z);
}
#endif

template <bool kRelu, bool kPact>
void clamp_fake_quant_kernel(const float* x, float* y, uint8_t* mask, int64_t n,
                             const FusedGrid& p) {
  int64_t i = 0;
#if defined(__SSE2__)
  i = clamp_fake_quant_sse<kRelu, kPact>(x, y, mask, n, p);
#endif
  for (; i < n; ++i) y[i] = clamp_fake_quant_one<kRelu, kPact>(x[i], p, mask[i]);
}

// fake_quantize's backward is g·mask, a product (g·0 keeps g's sign and NaN); the clamp's
// where() and relu's threshold_backward give +0 where their masks fail.
void clamp_fake_quant_backward_kernel(const float* g, const uint8_t* mask, float* dx, int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128i b = _mm_set1_epi32(kPassMask);
  for (; i + 4 <= n; i += 4) {
    const __m128i codes = load_mask4(mask + i);
    const __m128 g1 = _mm_mul_ps(_mm_loadu_ps(g + i), mask_ones(codes, kFqMask));
    const __m128 pass = _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_and_si128(codes, b), b));
    _mm_storeu_ps(dx + i, _mm_and_ps(g1, pass));
  }
#endif
  for (; i < n; ++i) {
    const float g1 = g[i] * static_cast<float>(mask[i] & kFqMask);
    dx[i] = (mask[i] & kPassMask) ? g1 : 0.0f;
  }
}

// PactClip's backward multiplies g1 by its masks as floats (1 or 0).
void pact_backward_kernel(const float* g, const uint8_t* mask, float* dx, float* dalpha_terms,
                          int64_t n) {
  int64_t i = 0;
#if defined(__SSE2__)
  for (; i + 4 <= n; i += 4) {
    const __m128i codes = load_mask4(mask + i);
    const __m128 g1 = _mm_mul_ps(_mm_loadu_ps(g + i), mask_ones(codes, kFqMask));
    if (dx != nullptr) _mm_storeu_ps(dx + i, _mm_mul_ps(g1, mask_ones(codes, kPassMask)));
    _mm_storeu_ps(dalpha_terms + i, _mm_mul_ps(g1, mask_ones(codes, kAlphaMask)));
  }
#endif
  for (; i < n; ++i) {
    const float g1 = g[i] * static_cast<float>(mask[i] & kFqMask);
    if (dx != nullptr) dx[i] = g1 * static_cast<float>((mask[i] & kPassMask) != 0);
    dalpha_terms[i] = g1 * static_cast<float>((mask[i] & kAlphaMask) != 0);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

struct ClampFakeQuantFn : public torch::autograd::Function<ClampFakeQuantFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const ClampFakeQuantGrid& grid) {
    const FusedGrid p = make_fused_grid(grid.lo, grid.hi, grid.scale, grid.zero_point,
                                        grid.quant_min, grid.quant_max);
    at::Tensor y = at::empty_like(x);
    at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kByte));
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    uint8_t* mp = mask.data_ptr<uint8_t>();
    const bool relu = grid.relu_first;
    at::parallel_for(0, x.numel(), kFusedGrain, [&](int64_t begin, int64_t end) {
      if (relu)
        clamp_fake_quant_kernel<true, false>(xp + begin, yp + begin, mp + begin, end - begin, p);
      else
        clamp_fake_quant_kernel<false, false>(xp + begin, yp + begin, mp + begin, end - begin, p);
    });
    ctx->saved_data["mask"] = mask;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (!grad[0].defined()) return {at::Tensor(), at::Tensor()};
    const at::Tensor g = grad[0].to(at::kFloat).contiguous();
    const at::Tensor mask = ctx->saved_data["mask"].toTensor();
    at::Tensor dx = at::empty_like(g);
    const float* gp = g.data_ptr<float>();
    const uint8_t* mp = mask.data_ptr<uint8_t>();
    float* dp = dx.data_ptr<float>();
    at::parallel_for(0, g.numel(), kFusedGrain, [&](int64_t begin, int64_t end) {
      clamp_fake_quant_backward_kernel(gp + begin, mp + begin, dp + begin, end - begin);
    });
    return {dx, at::Tensor()};
  }
};

struct PactFakeQuantFn : public torch::autograd::Function<PactFakeQuantFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& alpha,
                            int64_t bits) {
    const double a = pact_alpha_value(alpha);
    const int64_t n = unsigned_levels(bits);
    const FusedGrid p = make_fused_grid(0.0, a, a / static_cast<double>(n), 0, 0, n);
    at::Tensor y = at::empty_like(x);
    at::Tensor mask = at::empty(x.sizes(), x.options().dtype(at::kByte));
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    uint8_t* mp = mask.data_ptr<uint8_t>();
    at::parallel_for(0, x.numel(), kFusedGrain, [&](int64_t begin, int64_t end) {
      clamp_fake_quant_kernel<false, true>(xp + begin, yp + begin, mp + begin, end - begin, p);
    });
    ctx->saved_data["mask"] = mask;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    if (!grad[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor mask = ctx->saved_data["mask"].toTensor();
    const at::Tensor& g = grad[0];
    if (g.scalar_type() != at::kFloat || !g.is_contiguous()) {
      // The composition's own ops, so that dα sums in the order its layout gives.
      const auto bit = [&mask](uint8_t b) { return mask.bitwise_and(int64_t{b}).to(at::kBool); };
      const at::Tensor g1 = g * bit(kFqMask);
      const at::Tensor dx = g1 * bit(kPassMask).to(g1.scalar_type());
      const at::Tensor terms = g1 * bit(kAlphaMask).to(g1.scalar_type());
      return {dx, terms.sum().reshape({1}), at::Tensor()};
    }
    const bool want_dx = ctx->needs_input_grad(0);
    at::Tensor dx = want_dx ? at::empty_like(g) : at::Tensor();
    at::Tensor terms = at::empty_like(g);
    const float* gp = g.data_ptr<float>();
    const uint8_t* mp = mask.data_ptr<uint8_t>();
    float* dp = want_dx ? dx.data_ptr<float>() : nullptr;
    float* tp = terms.data_ptr<float>();
    at::parallel_for(0, g.numel(), kFusedGrain, [&](int64_t begin, int64_t end) {
      pact_backward_kernel(gp + begin, mp + begin, dp == nullptr ? nullptr : dp + begin, tp + begin,
                           end - begin);
    });
    return {dx, terms.sum().reshape({1}), at::Tensor()};
  }
};

}  // namespace

int64_t unsigned_levels(int64_t bits) {
  check_bits(bits, 1, "unsigned quantization grid");
  return (int64_t{1} << bits) - 1;
}

int64_t symmetric_levels(int64_t bits) {
  check_bits(bits, 2, "symmetric quantization grid");
  return (int64_t{1} << (bits - 1)) - 1;
}

at::Tensor round_ste(const at::Tensor& x) { return RoundSte::apply(x); }

at::Tensor dorefa_weight(const at::Tensor& w, int64_t bits) {
  const int64_t n = unsigned_levels(bits);
  const at::Tensor t = at::tanh(w);
  const at::Tensor amax = t.abs().max();
  if (amax.item<double>() == 0.0) return t * 0;
  const at::Tensor u = t / (amax * 2) + 0.5;
  if (bits > kMaxRoundedBits) return u * 2 - 1;
  const at::Tensor j = round_ste(u * static_cast<double>(n));
  const float s = static_cast<float>(1.0 / static_cast<double>(n));
  return (j * 2 - static_cast<double>(n)) * static_cast<double>(s);
}

at::Tensor dorefa_binary(const at::Tensor& w) { return BinarizeSte::apply(w); }

at::Tensor dorefa_quantize(const at::Tensor& w, int64_t bits) {
  return bits == 1 ? dorefa_binary(w) : dorefa_weight(w, bits);
}

at::Tensor dorefa_scale(const at::Tensor& w, int64_t bits) {
  at::NoGradGuard no_grad;
  const auto opts = w.options().dtype(at::kFloat);
  if (bits == 1) {
    const double e = w.detach().abs().mean().item<double>();
    return at::full({1}, e == 0.0 ? 1.0 : e, opts);
  }
  return at::full({1}, 1.0 / static_cast<double>(unsigned_levels(bits)), opts);
}

at::Tensor symmetric_scale(const at::Tensor& w, int64_t bits, bool per_channel) {
  at::NoGradGuard no_grad;
  const double n = static_cast<double>(symmetric_levels(bits));
  const at::Tensor a = as_float(w.detach()).abs();
  const at::Tensor amax = (per_channel && (w.dim() == 2 || w.dim() == 4))
                              ? a.reshape({w.size(0), -1}).amax(1)
                              : a.max().reshape({1});
  return at::where(amax == 0, at::ones_like(amax), amax / n);
}

at::Tensor asymmetric_scale(const at::Tensor& w, int64_t bits, bool per_channel) {
  at::NoGradGuard no_grad;
  const double n = static_cast<double>(unsigned_levels(bits));
  const at::Tensor a = as_float(w.detach());
  at::Tensor lo, hi;
  if (per_channel && (w.dim() == 2 || w.dim() == 4)) {
    const at::Tensor rows = a.reshape({w.size(0), -1});
    lo = rows.amin(1);
    hi = rows.amax(1);
  } else {
    lo = a.min().reshape({1});
    hi = a.max().reshape({1});
  }
  const at::Tensor diff = at::clamp_min(hi, 0.0) - at::clamp_max(lo, 0.0);
  return at::where(diff == 0, at::ones_like(diff), diff / n);
}

at::Tensor symmetric_fake_quant(const at::Tensor& w, const at::Tensor& scale, int64_t bits) {
  unsigned_levels(bits);
  if (bits > kMaxRoundedBits) return w;
  return SymmetricFakeQuantSte::apply(w, scale);
}

double pact_alpha_value(const at::Tensor& alpha) {
  return std::max(alpha.item<double>(), kPactMinAlpha);
}

at::Tensor pact_clip(const at::Tensor& x, const at::Tensor& alpha) {
  return PactClip::apply(x, alpha);
}

at::Tensor fake_quant_unsigned(const at::Tensor& x, double range, int64_t bits) {
  const int64_t n = unsigned_levels(bits);
  if (bits > kMaxRoundedBits) return x;
  const at::Tensor y =
      at::fake_quantize_per_tensor_affine(as_float(x), range / static_cast<double>(n), 0, 0, n);
  return y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type());
}

at::Tensor fake_quant_symmetric(const at::Tensor& x, double scale, int64_t bits) {
  const int64_t n = symmetric_levels(bits);
  if (bits > kMaxRoundedBits) return x;
  const at::Tensor y = at::fake_quantize_per_tensor_affine(as_float(x), scale, 0, -n, n);
  return y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type());
}

at::Tensor fake_quant_affine(const at::Tensor& x, double scale, int64_t zero_point, int64_t bits) {
  const int64_t n = unsigned_levels(bits);
  if (bits > kMaxRoundedBits) return x;
  const at::Tensor y = at::fake_quantize_per_tensor_affine(as_float(x), scale, zero_point, 0, n);
  return y.scalar_type() == x.scalar_type() ? y : y.to(x.scalar_type());
}

bool fused_fake_quant_applies(const at::Tensor& x) {
  return at::GradMode::is_enabled() && !torch::jit::tracer::isTracing() && x.defined() &&
         x.layout() == at::kStrided && x.device().is_cpu() && x.scalar_type() == at::kFloat &&
         x.is_contiguous();
}

at::Tensor fused_clamp_fake_quant(const at::Tensor& x, const ClampFakeQuantGrid& grid) {
  TORCH_CHECK(fused_fake_quant_applies(x), "fused_clamp_fake_quant: x must be a contiguous ",
              "float32 CPU tensor, outside a trace, with grad mode on");
  return ClampFakeQuantFn::apply(x, grid);
}

at::Tensor fused_pact_fake_quant(const at::Tensor& x, const at::Tensor& alpha, int64_t bits) {
  TORCH_CHECK(fused_fake_quant_applies(x), "fused_pact_fake_quant: x must be a contiguous ",
              "float32 CPU tensor, outside a trace, with grad mode on");
  TORCH_CHECK(bits >= 1 && bits <= kMaxRoundedBits, "fused_pact_fake_quant: ", bits, " bits");
  return PactFakeQuantFn::apply(x, alpha, bits);
}

void update_ema(at::Tensor& biased, at::Tensor& unbiased, const at::Tensor& value,
                const at::Tensor& decay, const at::Tensor& step) {
  at::NoGradGuard no_grad;
  const at::Tensor d = decay.to(biased.options());
  biased.copy_(biased * d + (1 - d) * value.to(biased.options()).reshape(biased.sizes()));
  unbiased.copy_(biased / (1 - d.pow(step.to(biased.options()))));
}

at::Tensor weight_grad_through(const std::function<at::Tensor(const at::Tensor&)>& q,
                               const at::Tensor& master, const at::Tensor& grad) {
  at::AutoGradMode enable(true);
  const at::Tensor m = master.detach().requires_grad_(true);
  const at::Tensor out = q(m);
  const at::Tensor g = torch::autograd::grad({out}, {m}, {grad}, /*retain_graph=*/false,
                                             /*create_graph=*/false, /*allow_unused=*/true)[0];
  return g.defined() ? g : at::zeros_like(master);
}

}  // namespace igb::compress
