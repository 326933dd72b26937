#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>

#include "core/activation.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// Options of SRCNN (model args and checkpoint keys: scale, channels).
///
///   auto model = make_srcnn(SrcnnOptions().scale(2).channels(3));
struct SrcnnOptions {
  /// Upscaling factor: output side / input side, 2, 3 or 4. Default 3.
  TORCH_ARG(int64_t, scale) = 3;
  /// Image channels: 1 (luma) or 3 (RGB). Default 1.
  TORCH_ARG(int64_t, channels) = 1;

 public:
  /// Each option as (JSON key, field, bounds); see options_from_json.
  template <class F>
  void visit(F&& f) {
    f("scale", scale_, kSrScaleBounds);
    f("channels", channels_);
  }
  void validate(const std::string&) const { check_sr_channels(channels_); }
};

/// SRCNN 9-5-5 (Dong et al. 2014): three convolutions (64 and 32 filters) on the bicubic-upsampled
/// input. Layers: conv1, relu1, conv2, relu2, conv3.
class SrcnnImpl : public SrModelImpl {
 public:
  explicit SrcnnImpl(SrcnnOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  SrcnnOptions options;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Activation relu1{nullptr}, relu2{nullptr};
};

Model make_srcnn(const SrcnnOptions& options);

}  // namespace igb::models::sr
