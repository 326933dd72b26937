#include "models/sr/vdsr.h"

namespace igb::models::sr {

namespace nn = torch::nn;

VdsrImpl::VdsrImpl(VdsrOptions o) : SrModelImpl(o.scale(), o.channels()), options(o) {
  const int64_t channels = o.channels(), depth = o.depth();
  head = register_module("head", nn::Conv2d(nn::Conv2dOptions(channels, 64, 3).padding(1)));
  head_act = register_module("head_act", Activation(ActivationKind::kReLU));
  body = Sequential();
  for (int64_t i = 0; i < depth - 2; ++i) {
    body->push_back(nn::Conv2d(nn::Conv2dOptions(64, 64, 3).padding(1)));
    body->push_back(Activation(ActivationKind::kReLU));
  }
  register_module("body", body);
  tail = register_module("tail", nn::Conv2d(nn::Conv2dOptions(64, channels, 3).padding(1)));
  torch::NoGradGuard no_grad;
  for (auto& mod : modules(false)) {
    if (auto* conv = mod->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
      nn::init::zeros_(conv->bias);
    }
  }
  nn::init::normal_(tail->weight, 0, 0.001);
}

torch::Tensor VdsrImpl::forward_impl(torch::Tensor x) {
  auto up = upsample(x);
  auto y = head_act(head(up));
  if (!body->is_empty()) y = body->forward(y);
  return up + tail(y);
}

nlohmann::json VdsrImpl::options_json() const { return options_to_json(options); }

Model make_vdsr(const VdsrOptions& options) { return std::make_shared<VdsrImpl>(options); }

}  // namespace igb::models::sr
