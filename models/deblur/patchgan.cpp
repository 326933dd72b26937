#include "models/deblur/patchgan.h"

#include <torch/nn/modules/conv.h>

#include <algorithm>

#include "core/activation.h"
#include "models/deblur/deblur_models.h"

namespace igb::models::deblur {

namespace nn = torch::nn;

namespace {
Activation leaky_relu() {
  return Activation(ActivationOptions(ActivationKind::kLeakyReLU).negative_slope(0.2));
}
nn::Conv2d conv4x4(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 4).stride(stride).padding(1));
}
}  // namespace

PatchGanImpl::PatchGanImpl(PatchGanOptions o) : options(o) {
  const int64_t ndf = o.ndf(), n = o.n_layers();
  model = Sequential();
  model->push_back(conv4x4(3, ndf, 2));
  model->push_back(leaky_relu());
  int64_t mult = 1;
  for (int64_t k = 1; k <= n; ++k) {
    const int64_t next = std::min<int64_t>(int64_t{1} << k, 8);
    model->push_back(conv4x4(ndf * mult, ndf * next, k < n ? 2 : 1));
    model->push_back(instance_norm(ndf * next));
    model->push_back(leaky_relu());
    mult = next;
  }
  model->push_back(conv4x4(ndf * mult, 1, 1));
  register_module("model", model);
  init_gan_weights(*this);
}

torch::Tensor PatchGanImpl::forward_impl(torch::Tensor x) { return model->forward(x); }

nlohmann::json PatchGanImpl::options_json() const { return options_to_json(options); }

Model make_patchgan(const PatchGanOptions& options) {
  return std::make_shared<PatchGanImpl>(options);
}

}  // namespace igb::models::deblur
