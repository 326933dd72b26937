#include "compress/batchnorm_folding.h"

#include "core/error.h"

namespace igb::compress {

FoldedWeights fold_batchnorm(const at::Tensor& weight, const at::Tensor& bias,
                             const BatchNormParams& bn, FoldedLayer layer, int64_t groups) {
  const auto w = weight.detach().to(torch::kDouble);
  const int64_t out = layer == FoldedLayer::kConvolution ? w.size(0) : w.size(1) * groups;
  const int64_t channels = bn.running_mean.numel();
  if (channels != out)
    throw InputError("cannot fold a BatchNorm of " + std::to_string(channels) +
                     " channels into a layer of " + std::to_string(out) + " output channels");
  const auto as_double = [&](const at::Tensor& t, double fill) {
    return t.defined() ? t.detach().to(torch::kDouble).reshape({-1})
                       : torch::full({out}, fill, w.options());
  };
  const auto mean = as_double(bn.running_mean, 0);
  const auto scale = as_double(bn.gamma, 1) / (as_double(bn.running_var, 1) + bn.eps).sqrt();
  const auto beta = as_double(bn.beta, 0);
  const auto b = bias.defined() ? bias.detach().to(torch::kDouble).reshape({-1})
                                : torch::zeros({out}, w.options());
  at::Tensor folded;
  if (layer == FoldedLayer::kConvolution) {
    std::vector<int64_t> shape(w.dim(), 1);
    shape[0] = out;
    folded = w * scale.view(shape);
  } else {
    // (in, out/groups, k...) viewed as (groups, in/groups, out/groups, k...).
    std::vector<int64_t> view = {groups, w.size(0) / groups, w.size(1)};
    std::vector<int64_t> scale_shape = {groups, 1, w.size(1)};
    for (int64_t d = 2; d < w.dim(); ++d) {
      view.push_back(w.size(d));
      scale_shape.push_back(1);
    }
    folded = (w.reshape(view) * scale.view(scale_shape)).reshape(w.sizes());
  }
  const auto dtype = weight.scalar_type();
  return {folded.to(dtype).contiguous(), ((b - mean) * scale + beta).to(dtype).contiguous()};
}

ChannelAffine channel_affine(const BatchNormParams* bn, const at::Tensor& bias, int64_t channels) {
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  auto shift = bias.defined() ? bias.detach().to(torch::kDouble).reshape({-1})
                              : torch::zeros({channels}, options);
  if (!bn) return {torch::ones({channels}, options), shift};
  if (bn->running_mean.numel() != channels)
    throw InputError("a BatchNorm of " + std::to_string(bn->running_mean.numel()) +
                     " channels after a layer of " + std::to_string(channels) + " channels");
  auto scale = (bn->running_var.detach().to(torch::kDouble).reshape({-1}) + bn->eps).rsqrt();
  if (bn->gamma.defined()) scale = scale * bn->gamma.detach().to(torch::kDouble).reshape({-1});
  shift = (shift - bn->running_mean.detach().to(torch::kDouble).reshape({-1})) * scale;
  if (bn->beta.defined()) shift = shift + bn->beta.detach().to(torch::kDouble).reshape({-1});
  return {scale, shift};
}

}  // namespace igb::compress
