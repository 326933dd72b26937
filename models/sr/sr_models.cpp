#include "models/sr/sr_models.h"

#include <torch/nn/functional/upsampling.h>

#include "models/sr/espcn.h"
#include "models/sr/fsrcnn.h"
#include "models/sr/sr_model.h"
#include "models/sr/srcnn.h"
#include "models/sr/vdsr.h"

namespace igb::models::sr {

torch::Tensor SrModelImpl::upsample(const torch::Tensor& x) const {
  namespace F = torch::nn::functional;
  return F::interpolate(x, F::InterpolateFuncOptions()
                               .size(std::vector<int64_t>{x.size(2) * scale_, x.size(3) * scale_})
                               .mode(torch::kBicubic)
                               .align_corners(false));
}

void check_sr_channels(int64_t channels) {
  if (channels != 1 && channels != 3)
    throw InputError("SR models take channels 1 (luma) or 3 (RGB), got " +
                     std::to_string(channels));
}

void register_sr_models(Registry<ModelSpec>& registry, const std::string& family) {
  add_model(registry, "srcnn", family, make_srcnn,
            "SRCNN 9-5-5 (Dong et al. 2014) on the bicubic-upsampled input");
  add_model(registry, "fsrcnn", family, make_fsrcnn,
            "FSRCNN(d, s, m) with transposed-conv output (Dong et al. 2016)");
  add_model(registry, "espcn", family, make_espcn, "ESPCN sub-pixel convolution (Shi et al. 2016)");
  add_model(registry, "vdsr", family, make_vdsr,
            "VDSR, depth-layer residual network (Kim et al. 2016)");
}

}  // namespace igb::models::sr
