#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pixelshuffle.h>

#include "core/activation.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// ESPCN (Shi et al. 2016): conv 5×5 C→64, tanh, conv 3×3 64→32, tanh, conv 3×3 32→C·r², pixel
/// shuffle by r. Layers: conv1, act1, conv2, act2, conv3, pixel_shuffle. Options: scale, channels.
class EspcnImpl : public SrModelImpl {
 public:
  EspcnImpl(int64_t scale, int64_t channels);
  torch::Tensor forward(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Activation act1{nullptr}, act2{nullptr};
  torch::nn::PixelShuffle pixel_shuffle{nullptr};
};

Model make_espcn(const nlohmann::json& options);

}  // namespace igb::models::sr
