#include "models/sr/espcn.h"

namespace igb::models::sr {

namespace nn = torch::nn;

EspcnImpl::EspcnImpl(EspcnOptions o) : SrModelImpl(o.scale(), o.channels()), options(o) {
  const int64_t scale = o.scale(), channels = o.channels();
  conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(channels, 64, 5).padding(2)));
  act1 = register_module("act1", Activation(ActivationKind::kTanh));
  conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(64, 32, 3).padding(1)));
  act2 = register_module("act2", Activation(ActivationKind::kTanh));
  conv3 = register_module(
      "conv3", nn::Conv2d(nn::Conv2dOptions(32, channels * scale * scale, 3).padding(1)));
  pixel_shuffle =
      register_module("pixel_shuffle", nn::PixelShuffle(nn::PixelShuffleOptions(scale)));
}

torch::Tensor EspcnImpl::forward_impl(torch::Tensor x) {
  x = act1(conv1(x));
  x = act2(conv2(x));
  return pixel_shuffle(conv3(x));
}

nlohmann::json EspcnImpl::options_json() const { return options_to_json(options); }

Model make_espcn(const EspcnOptions& options) { return std::make_shared<EspcnImpl>(options); }

}  // namespace igb::models::sr
