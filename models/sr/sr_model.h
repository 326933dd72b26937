#pragma once

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

/// Reads the options every SR model has: `scale` (2, 3 or 4; default 3) and `channels`
/// (1 or 3; default 1).
void read_sr_options(OptionReader& r, int64_t& scale, int64_t& channels);

}  // namespace igb::models::sr
