#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>

#include "core/activation.h"
#include "core/sequential.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// Options of VDSR (model args and checkpoint keys: scale, channels, depth).
///
///   auto model = make_vdsr(VdsrOptions().depth(10));
struct VdsrOptions {
  /// Upscaling factor: output side / input side, 2, 3 or 4. Default 3.
  TORCH_ARG(int64_t, scale) = 3;
  /// Image channels: 1 (luma) or 3 (RGB). Default 1.
  TORCH_ARG(int64_t, channels) = 1;
  /// Convolutions in all, head and tail included, 2 … 200. Default 20.
  TORCH_ARG(int64_t, depth) = 20;

 public:
  /// Each option as (JSON key, field, bounds); see options_from_json.
  template <class F>
  void visit(F&& f) {
    f("scale", scale_, kSrScaleBounds);
    f("channels", channels_);
    f("depth", depth_, OptionBounds{2, 200});
  }
  void validate(const std::string&) const { check_sr_channels(channels_); }
};

/// VDSR (Kim et al. 2016): `depth` 3×3 convolutions of 64 filters on the bicubic-upsampled input,
/// predicting the residual that is added back to it. Layers: head, head_act, body (depth − 2 pairs
/// of conv and ReLU at indices 0,1 … ), tail.
class VdsrImpl : public SrModelImpl {
 public:
  explicit VdsrImpl(VdsrOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  VdsrOptions options;
  torch::nn::Conv2d head{nullptr}, tail{nullptr};
  Activation head_act{nullptr};
  Sequential body{nullptr};
};

Model make_vdsr(const VdsrOptions& options);

}  // namespace igb::models::sr
