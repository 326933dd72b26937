#include "models/sr/fsrcnn.h"

#include <cmath>

#include "core/activation.h"
#include "core/conv_transpose.h"
#include "core/sequential.h"

namespace igb::models::sr {

namespace nn = torch::nn;

namespace {
Activation prelu(int64_t channels) {
  return Activation(ActivationOptions(ActivationKind::kPReLU).num_parameters(channels));
}
}  // namespace

FsrcnnImpl::FsrcnnImpl(FsrcnnOptions o) : SrModelImpl(o.scale(), o.channels()), options(o) {
  const int64_t scale = o.scale(), channels = o.channels(), d = o.d(), s = o.s(), m = o.m();
  first_part = register_module(
      "first_part", Sequential(nn::Conv2d(nn::Conv2dOptions(channels, d, 5).padding(2)), prelu(d)));
  mid_part = Sequential();
  mid_part->push_back(Sequential(nn::Conv2d(nn::Conv2dOptions(d, s, 1)), prelu(s)));
  for (int64_t i = 0; i < m; ++i) {
    mid_part->push_back(nn::Conv2d(nn::Conv2dOptions(s, s, 3).padding(1)));
    mid_part->push_back(prelu(s));
  }
  mid_part->push_back(Sequential(nn::Conv2d(nn::Conv2dOptions(s, d, 1)), prelu(d)));
  register_module("mid_part", mid_part);
  last_part =
      register_module("last_part", nn::ConvTranspose2d(nn::ConvTranspose2dOptions(d, channels, 9)
                                                           .stride(scale)
                                                           .padding(4)
                                                           .output_padding(scale - 1)));

  torch::NoGradGuard no_grad;
  for (auto& mod : modules(false)) {
    if (auto* conv = mod->as<nn::Conv2d>()) {
      const double fan = conv->weight.size(0) * conv->weight[0][0].numel();
      nn::init::normal_(conv->weight, 0, std::sqrt(2.0 / fan));
      nn::init::zeros_(conv->bias);
    }
  }
  nn::init::normal_(last_part->weight, 0, 0.001);
  nn::init::zeros_(last_part->bias);
}

torch::Tensor FsrcnnImpl::forward_impl(torch::Tensor x) {
  x = first_part->forward(x);
  x = mid_part->forward(x);
  return fast_conv_transpose2d(*last_part, x);
}

nlohmann::json FsrcnnImpl::options_json() const { return options_to_json(options); }

Model make_fsrcnn(const FsrcnnOptions& options) { return std::make_shared<FsrcnnImpl>(options); }

}  // namespace igb::models::sr
