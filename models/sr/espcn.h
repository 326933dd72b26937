#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pixelshuffle.h>

#include "core/activation.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// Options of ESPCN (model args and checkpoint keys: scale, channels).
///
///   auto model = make_espcn(EspcnOptions().scale(4));
struct EspcnOptions {
  /// Upscaling factor r: output side / input side, 2, 3 or 4; conv3 has C·r² filters. Default 3.
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

/// ESPCN (Shi et al. 2016): conv 5×5 C→64, tanh, conv 3×3 64→32, tanh, conv 3×3 32→C·r², pixel
/// shuffle by r. Layers: conv1, act1, conv2, act2, conv3, pixel_shuffle.
class EspcnImpl : public SrModelImpl {
 public:
  explicit EspcnImpl(EspcnOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  EspcnOptions options;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Activation act1{nullptr}, act2{nullptr};
  torch::nn::PixelShuffle pixel_shuffle{nullptr};
};

Model make_espcn(const EspcnOptions& options);

}  // namespace igb::models::sr
