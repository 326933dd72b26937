#pragma once

#include <torch/nn/modules/conv.h>

#include "core/sequential.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

/// FSRCNN(d, s, m) (Dong et al. 2016) in the common PyTorch layout, so schedules written for it
/// name the same parameters:
///   first_part   Sequential(conv 5×5 C→d, PReLU(d))
///   mid_part     Sequential(Sequential(conv 1×1 d→s, PReLU(s)),
///                           m × (conv 3×3 s→s, PReLU(s)),          indices 1 … 2m
///                           Sequential(conv 1×1 s→d, PReLU(d)))    index 2m+1
///   last_part    ConvTranspose2d(d→C, 9×9, stride = scale)
/// Options: scale, channels, d (default 56), s (12), m (4).
class FsrcnnImpl : public SrModelImpl {
 public:
  FsrcnnImpl(int64_t scale, int64_t channels, int64_t d, int64_t s, int64_t m);
  torch::Tensor forward(torch::Tensor x) override;
  nlohmann::json options_json() const override;

  Sequential first_part{nullptr}, mid_part{nullptr};
  torch::nn::ConvTranspose2d last_part{nullptr};

 private:
  int64_t d_, s_, m_;
};

Model make_fsrcnn(const nlohmann::json& options);

}  // namespace igb::models::sr
