#include "models/deblur/deblur_models.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>

#include "models/deblur/deblurgan.h"
#include "models/deblur/patchgan.h"

namespace igb::models::deblur {

namespace nn = torch::nn;

nn::InstanceNorm2d instance_norm(int64_t channels) {
  return nn::InstanceNorm2d(
      nn::InstanceNorm2dOptions(channels).affine(false).track_running_stats(false));
}

void init_gan_weights(nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& mod : model.modules(false)) {
    if (!mod->as<nn::Conv2d>() && !mod->as<nn::ConvTranspose2d>()) continue;
    for (auto& p : mod->named_parameters(false)) {
      if (p.key() == "weight") nn::init::normal_(p.value(), 0, 0.02);
      if (p.key() == "bias") nn::init::zeros_(p.value());
    }
  }
}

void register_deblur_models(Registry<ModelSpec>& registry, const std::string& family) {
  add_model(registry, "deblurgan", family, make_deblurgan,
            "DeblurGAN ResNet generator, 9 blocks, global skip (Kupyn et al. 2018)");
  add_model(registry, "deblurgan_small", family, make_deblurgan,
            "DeblurGAN generator with ngf 16, 3 blocks and no dropout (quick runs)",
            DeblurGanOptions().ngf(16).blocks(3).dropout(0));
  add_model(registry, "patchgan", family, make_patchgan,
            "70x70 PatchGAN critic of pix2pix and DeblurGAN (instance norm, no sigmoid)");
  add_model(registry, "patchgan_small", family, make_patchgan, "PatchGAN critic with ndf 16",
            PatchGanOptions().ndf(16));
  add_model(registry, "patchgan_tiny", family, make_patchgan,
            "PatchGAN critic with ndf 8 (deblurgan_small's default critic)",
            PatchGanOptions().ndf(8));
}

}  // namespace igb::models::deblur
