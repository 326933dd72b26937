#include "compress/fake_quant.h"

#include <torch/autograd.h>

#include <algorithm>
#include <sstream>

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
