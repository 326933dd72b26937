#pragma once

#include <string>

#include "models/model.h"

namespace igb::models::sr {

/// Base of the super-resolution models: a low-resolution image [N, C, h, w] in, the image
/// [N, C, h·scale, w·scale] out, C = 1 (luma) or 3 (RGB).
class SrModelImpl : public ModelImpl {
 public:
  SrModelImpl(int64_t scale, int64_t channels) : scale_(scale), channels_(channels) {}

  int64_t scale() const { return scale_; }
  int64_t channels() const { return channels_; }
  /// A 32×32 low-resolution patch.
  std::vector<int64_t> input_shape() const override { return {1, channels_, 32, 32}; }

 protected:
  /// Bicubic upsampling by `scale` (for models that work on the upsampled image).
  torch::Tensor upsample(const torch::Tensor& x) const;

  int64_t scale_;
  int64_t channels_;
};

/// The range of `scale`, the option every SR model has: 2, 3 or 4.
inline constexpr OptionBounds kSrScaleBounds{2, 4};

/// Throws InputError unless `channels` (the other option every SR model has) is 1 or 3.
void check_sr_channels(int64_t channels);

}  // namespace igb::models::sr
