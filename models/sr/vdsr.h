#pragma once

#include <torch/nn/modules/conv.h>

#include "core/activation.h"
#include "core/sequential.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// VDSR (Kim et al. 2016): `depth` 3×3 convolutions of 64 filters on the bicubic-upsampled input,
/// predicting the residual that is added back to it. Layers: head, head_act, body (depth − 2 pairs
/// of conv and ReLU at indices 0,1 … ), tail. Options: scale, channels, depth (default 20, ≥ 2).
class VdsrImpl : public SrModelImpl {
 public:
  VdsrImpl(int64_t scale, int64_t channels, int64_t depth);
  torch::Tensor forward(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  torch::nn::Conv2d head{nullptr}, tail{nullptr};
  Activation head_act{nullptr};
  Sequential body{nullptr};

 private:
  int64_t depth_;
};

Model make_vdsr(const nlohmann::json& options);

}  // namespace igb::models::sr
