#pragma once

#include <torch/nn/modules/conv.h>

#include "core/activation.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// SRCNN 9-5-5 (Dong et al. 2014): three convolutions (64 and 32 filters) on the bicubic-upsampled
/// input. Layers: conv1, relu1, conv2, relu2, conv3. Options: scale, channels.
class SrcnnImpl : public SrModelImpl {
 public:
  SrcnnImpl(int64_t scale, int64_t channels);
  torch::Tensor forward(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Activation relu1{nullptr}, relu2{nullptr};
};

Model make_srcnn(const nlohmann::json& options);

}  // namespace igb::models::sr
