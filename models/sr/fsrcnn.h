#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>

#include "core/sequential.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// Options of FSRCNN(d, s, m) (model args and checkpoint keys: scale, channels, d, s, m).
///
///   auto model = make_fsrcnn(FsrcnnOptions().d(32).s(5).m(2));
struct FsrcnnOptions {
  /// Upscaling factor: output side / input side, 2, 3 or 4; the stride of last_part. Default 3.
  TORCH_ARG(int64_t, scale) = 3;
  /// Image channels: 1 (luma) or 3 (RGB). Default 1.
  TORCH_ARG(int64_t, channels) = 1;
  /// Feature maps of first_part and of the expanding layer, 1 … 4096. Default 56.
  TORCH_ARG(int64_t, d) = 56;
  /// Feature maps of the shrinking and mapping layers, 1 … 4096. Default 12.
  TORCH_ARG(int64_t, s) = 12;
  /// Number of 3×3 mapping layers, 0 … 64. Default 4.
  TORCH_ARG(int64_t, m) = 4;

 public:
  /// Each option as (JSON key, field, bounds); see options_from_json.
  template <class F>
  void visit(F&& f) {
    f("scale", scale_, kSrScaleBounds);
    f("channels", channels_);
    f("d", d_, OptionBounds{1, 4096});
    f("s", s_, OptionBounds{1, 4096});
    f("m", m_, OptionBounds{0, 64});
  }
  void validate(const std::string&) const { check_sr_channels(channels_); }
};

/// FSRCNN(d, s, m) (Dong et al. 2016) in the common PyTorch layout, so schedules written for it
/// name the same parameters:
///   first_part   Sequential(conv 5×5 C→d, PReLU(d))
///   mid_part     Sequential(Sequential(conv 1×1 d→s, PReLU(s)),
///                           m × (conv 3×3 s→s, PReLU(s)),          indices 1 … 2m
///                           Sequential(conv 1×1 s→d, PReLU(d)))    index 2m+1
///   last_part    ConvTranspose2d(d→C, 9×9, stride = scale)
class FsrcnnImpl : public SrModelImpl {
 public:
  explicit FsrcnnImpl(FsrcnnOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  FsrcnnOptions options;
  Sequential first_part{nullptr}, mid_part{nullptr};
  torch::nn::ConvTranspose2d last_part{nullptr};
};

Model make_fsrcnn(const FsrcnnOptions& options);

}  // namespace igb::models::sr
