#include "models/sr/srcnn.h"

namespace igb::models::sr {

namespace nn = torch::nn;

SrcnnImpl::SrcnnImpl(int64_t scale, int64_t channels) : SrModelImpl(scale, channels) {
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(channels, 64, 9).padding(4)));
  relu1 = register_module("relu1", Activation(ActivationKind::kReLU));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 32, 5).padding(2)));
  relu2 = register_module("relu2", Activation(ActivationKind::kReLU));
  conv3 = register_module("conv3", nn::Conv2d(nn::Conv2dOptions(32, channels, 5).padding(2)));
  torch::NoGradGuard no_grad;
  for (auto* conv : {&conv1, &conv2}) {
    nn::init::kaiming_normal_((*conv)->weight, 0, torch::kFanOut, torch::kReLU);
    nn::init::zeros_((*conv)->bias);
  }
  nn::init::normal_(conv3->weight, 0, 0.001);
  nn::init::zeros_(conv3->bias);
}

torch::Tensor SrcnnImpl::forward(torch::Tensor x) {
  x = upsample(x);
  x = relu1(conv1(x));
  x = relu2(conv2(x));
  return conv3(x);
}

nlohmann::json SrcnnImpl::options_json() const { return {{"scale", scale_}, {"channels", channels_}}; }

Model make_srcnn(const nlohmann::json& options) {
  OptionReader r("srcnn", options);
  int64_t scale, channels;
  read_sr_options(r, scale, channels);
  r.finish();
  return std::make_shared<SrcnnImpl>(scale, channels);
}

}  // namespace igb::models::sr
