#include "compress/quant_modules.h"

#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "compress/fake_quant.h"
#include "core/error.h"

namespace igb::compress {

DorefaActQuantImpl::DorefaActQuantImpl(DorefaActQuantOptions options) : options_(options) {
  unsigned_levels(options_.bits());
}

at::Tensor DorefaActQuantImpl::forward(const at::Tensor& x) {
  const int64_t bits = options_.bits();
  if (bits <= kMaxRoundedBits && fused_fake_quant_applies(x)) {
    ClampFakeQuantGrid grid;
    grid.lo = 0.0;
    grid.hi = 1.0;
    grid.quant_max = unsigned_levels(bits);
    grid.scale = 1.0 / static_cast<double>(grid.quant_max);
    return fused_clamp_fake_quant(x, grid);
  }
  return fake_quant_unsigned(at::clamp(x, 0.0, 1.0), 1.0, bits);
}

PactActQuantImpl::PactActQuantImpl(PactActQuantOptions options) : options_(options) {
  unsigned_levels(options_.bits());
  clip_val = register_parameter("clip_val", torch::full({1}, options_.init_alpha()));
}

at::Tensor PactActQuantImpl::forward(const at::Tensor& x) {
  const double alpha = pact_alpha_value(clip_val);
  const bool learn = at::GradMode::is_enabled() && clip_val.requires_grad();
  if (learn && options_.bits() <= kMaxRoundedBits && fused_fake_quant_applies(x))
    return fused_pact_fake_quant(x, clip_val, options_.bits());
  const at::Tensor y = learn ? pact_clip(x, clip_val) : at::clamp(x, 0.0, alpha);
  return fake_quant_unsigned(y, alpha, options_.bits());
}

FakeLinearQuantImpl::FakeLinearQuantImpl(FakeLinearQuantOptions options) : options_(options) {
  if (options_.mode() == LinearQuantMode::kSymmetric)
    symmetric_levels(options_.bits());
  else
    unsigned_levels(options_.bits());
  ema_decay = register_buffer("ema_decay", torch::scalar_tensor(options_.ema_decay(), at::kFloat));
  tracked_min_biased = register_buffer("tracked_min_biased", torch::zeros({1}));
  tracked_min = register_buffer("tracked_min", torch::zeros({1}));
  tracked_max_biased = register_buffer("tracked_max_biased", torch::zeros({1}));
  tracked_max = register_buffer("tracked_max", torch::zeros({1}));
  iter_count = register_buffer("iter_count", torch::zeros({1}));
  scale = register_buffer("scale", torch::ones({1}));
  zero_point = register_buffer("zero_point", torch::zeros({1}));
}

namespace {

// The tracked range (min, max), read in place on the CPU, else in one device-to-host copy.
std::pair<double, double> fq_tracked(const at::Tensor& lo, const at::Tensor& hi) {
  const auto readable = [](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.numel() == 1;
  };
  if (readable(lo) && readable(hi))
    return {static_cast<double>(*lo.data_ptr<float>()), static_cast<double>(*hi.data_ptr<float>())};
  const at::Tensor both = at::cat({lo.reshape({1}), hi.reshape({1})}).to(at::kCPU, at::kDouble);
  return {both[0].item<double>(), both[1].item<double>()};
}

struct FqGrid {
  double lo, hi, scale;
  int64_t zero_point;
};

FqGrid fq_grid(const at::Tensor& tracked_min, const at::Tensor& tracked_max, LinearQuantMode mode,
               int64_t bits) {
  const auto [lo, hi] = fq_tracked(tracked_min, tracked_max);
  if (mode == LinearQuantMode::kSymmetric) {
    const double m = std::max(std::abs(lo), std::abs(hi));
    return {-m, m, m == 0.0 ? 1.0 : m / static_cast<double>(symmetric_levels(bits)), 0};
  }
  const int64_t n = unsigned_levels(bits);
  const double diff = std::max(hi, 0.0) - std::min(lo, 0.0);
  const double s = diff == 0.0 ? 1.0 : diff / static_cast<double>(n);
  // Clamped before the conversion: a NaN range (a NaN in the batch reaches the EMAs) gives zero
  // point 0 instead of an undefined conversion.
  const double z = -std::nearbyint(std::min(lo, 0.0) / s);
  const int64_t zero_point =
      std::isfinite(z) ? static_cast<int64_t>(std::clamp(z, 0.0, static_cast<double>(n))) : 0;
  return {lo, hi, s, zero_point};
}

}  // namespace

double FakeLinearQuantImpl::range() const {
  const auto [lo, hi] = fq_tracked(tracked_min, tracked_max);
  return std::max(std::abs(lo), std::abs(hi));
}

double FakeLinearQuantImpl::quant_scale() const {
  return fq_grid(tracked_min, tracked_max, options_.mode(), options_.bits()).scale;
}

int64_t FakeLinearQuantImpl::quant_zero_point() const {
  return fq_grid(tracked_min, tracked_max, options_.mode(), options_.bits()).zero_point;
}

void FakeLinearQuantImpl::update_range(const at::Tensor& batch_min, const at::Tensor& batch_max) {
  const LinearQuantMode mode = options_.mode();
  const int64_t bits = options_.bits();
  at::NoGradGuard no_grad;
  iter_count.add_(1);
  update_ema(tracked_min_biased, tracked_min, batch_min, ema_decay, iter_count);
  update_ema(tracked_max_biased, tracked_max, batch_max, ema_decay, iter_count);
  // Distiller's symmetric/asymmetric_linear_quantization_params: a zero range counts as n.
  if (mode == LinearQuantMode::kSymmetric) {
    const double n = static_cast<double>(symmetric_levels(bits));
    const at::Tensor sat = at::maximum(tracked_min.abs(), tracked_max.abs());
    scale.copy_(n / at::where(sat == 0, at::full_like(sat, n), sat));
    zero_point.zero_();
  } else {
    const double n = static_cast<double>(unsigned_levels(bits));
    const at::Tensor lo = at::clamp_max(tracked_min, 0.0);
    const at::Tensor diff = at::clamp_min(tracked_max, 0.0) - lo;
    scale.copy_(n / at::where(diff == 0, at::full_like(diff, n), diff));
    zero_point.copy_(at::round(scale * lo));
    if (mode == LinearQuantMode::kAsymmetricSigned)
      zero_point.add_(static_cast<double>(int64_t{1} << (bits - 1)));
  }
}

at::Tensor FakeLinearQuantImpl::quantize(const at::Tensor& x, bool relu_first) {
  const LinearQuantMode mode = options_.mode();
  const int64_t bits = options_.bits();
  const bool fused = is_training() && bits <= kMaxRoundedBits && fused_fake_quant_applies(x);
  const at::Tensor in = fused || !relu_first ? x : at::relu(x);
  if (is_training()) {
    at::NoGradGuard no_grad;
    if (fused) {
      // min and max of relu(x) are relu of x's (NaN stays NaN); the sign of a zero cannot change
      // the EMAs, which start at +0.
      auto [lo, hi] = at::aminmax(x.detach());
      update_range(relu_first ? at::relu(lo) : lo, relu_first ? at::relu(hi) : hi);
    } else {
      const at::Tensor d = in.detach();
      update_range(d.min(), d.max());
    }
  }
  const FqGrid g = fq_grid(tracked_min, tracked_max, mode, bits);
  const auto finite_float = [](double v) { return std::isfinite(static_cast<float>(v)); };
  if (fused && finite_float(g.lo) && finite_float(g.hi) && static_cast<float>(g.scale) > 0 &&
      finite_float(1.0 / static_cast<double>(static_cast<float>(g.scale)))) {
    ClampFakeQuantGrid grid;
    grid.lo = g.lo;
    grid.hi = g.hi;
    grid.scale = g.scale;
    grid.zero_point = g.zero_point;
    grid.relu_first = relu_first;
    if (mode == LinearQuantMode::kSymmetric) {
      grid.quant_max = symmetric_levels(bits);
      grid.quant_min = -grid.quant_max;
    } else {
      grid.quant_min = 0;
      grid.quant_max = unsigned_levels(bits);
    }
    return fused_clamp_fake_quant(x, grid);
  }
  const at::Tensor y = at::clamp(fused && relu_first ? at::relu(x) : in, g.lo, g.hi);
  if (mode == LinearQuantMode::kSymmetric) return fake_quant_symmetric(y, g.scale, bits);
  return fake_quant_affine(y, g.scale, g.zero_point, bits);
}

at::Tensor FakeLinearQuantImpl::forward(const at::Tensor& x) { return quantize(x, false); }

at::Tensor FakeQuantReluImpl::forward(const at::Tensor& x) { return quantize(x, true); }

namespace {

at::Tensor find_tensor(const torch::OrderedDict<std::string, at::Tensor>& dict,
                       const std::string& key) {
  const at::Tensor* t = dict.find(key);
  return t == nullptr ? at::Tensor() : *t;
}

}  // namespace

QuantizedParam QuantizedParam::prepare(torch::nn::Module& module, const std::string& param,
                                       int64_t bits, ParamQuantMethod method, bool per_channel) {
  QuantizedParam qp;
  qp.name_ = param;
  qp.bits_ = bits;
  qp.method_ = method;
  qp.per_channel_ = method != ParamQuantMethod::kDorefa && per_channel;
  if (method == ParamQuantMethod::kSymmetric)
    symmetric_levels(bits);
  else
    unsigned_levels(bits);
  qp.param = find_tensor(module.named_parameters(/*recurse=*/false), param);
  if (!qp.param.defined())
    throw InputError(module.name() + " has no parameter '" + param + "' to quantize");
  const std::string master_name = "float_" + param;
  const std::string scale_name = param + "_scale";
  const std::string bits_name = param + "_bits";
  const auto buffers = module.named_buffers(/*recurse=*/false);
  qp.master = find_tensor(buffers, master_name);
  if (qp.master.defined()) {
    qp.scale = find_tensor(buffers, scale_name);
    qp.bits_buffer = find_tensor(buffers, bits_name);
    if (!qp.scale.defined() || !qp.bits_buffer.defined())
      throw InputError(module.name() + " has '" + master_name + "' but no '" + scale_name +
                       "' or '" + bits_name + "'");
    const int64_t had = qp.bits_buffer.item<int64_t>();
    if (had != bits) {
      std::ostringstream msg;
      msg << module.name() << "." << param << " was quantized to " << had
          << " bits; the schedule asks for " << bits;
      throw InputError(msg.str());
    }
    return qp;
  }
  at::NoGradGuard no_grad;
  qp.master = module.register_buffer(master_name, qp.param.detach().clone());
  qp.scale = module.register_buffer(scale_name, qp.scale_value(qp.master));
  qp.bits_buffer = module.register_buffer(
      bits_name, torch::scalar_tensor(bits, qp.param.options().dtype(at::kLong)));
  qp.quantize();
  return qp;
}

at::Tensor QuantizedParam::scale_value(const at::Tensor& master) const {
  switch (method_) {
    case ParamQuantMethod::kDorefa:
      return dorefa_scale(master, bits_);
    case ParamQuantMethod::kSymmetric:
      return symmetric_scale(master, bits_, per_channel_);
    case ParamQuantMethod::kAsymmetric:
      return asymmetric_scale(master, bits_, per_channel_);
  }
  return {};
}

at::Tensor QuantizedParam::quantize_value(const at::Tensor& master) const {
  if (method_ == ParamQuantMethod::kDorefa) return dorefa_quantize(master, bits_);
  return symmetric_fake_quant(master, scale_value(master), bits_);
}

void QuantizedParam::quantize() {
  at::NoGradGuard no_grad;
  param.copy_(quantize_value(master));
  scale.copy_(scale_value(master));
}

void QuantizedParam::before_step() {
  at::Tensor& grad = param.mutable_grad();
  const bool identity = method_ != ParamQuantMethod::kDorefa || bits_ == 1;
  if (grad.defined() && !identity) {
    const at::Tensor g = weight_grad_through(
        [this](const at::Tensor& m) { return quantize_value(m); }, master, grad);
    at::NoGradGuard no_grad;
    grad.copy_(g);
  }
  at::NoGradGuard no_grad;
  param.copy_(master);
}

void QuantizedParam::after_step() {
  {
    at::NoGradGuard no_grad;
    master.copy_(param);
  }
  quantize();
}

}  // namespace igb::compress
