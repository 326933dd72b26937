#include "models/sr/srcnn.h"

namespace igb::models::sr {

namespace nn = torch::nn;

SrcnnImpl::SrcnnImpl(SrcnnOptions o) : SrModelImpl(o.scale(), o.channels()), options(o) {
  const int64_t channels = o.channels();
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

torch::Tensor SrcnnImpl::forward_impl(torch::Tensor x) {
  x = upsample(x);
  x = relu1(conv1(x));
  x = relu2(conv2(x));
  return conv3(x);
}

nlohmann::json SrcnnImpl::options_json() const { return options_to_json(options); }

Model make_srcnn(const SrcnnOptions& options) { return std::make_shared<SrcnnImpl>(options); }

}  // namespace igb::models::sr
