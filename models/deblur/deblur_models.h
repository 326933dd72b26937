#pragma once

#include <torch/nn/modules/instancenorm.h>

#include "models/model.h"

namespace igb::models::deblur {

/// Adds deblurgan, deblurgan_small and patchgan to `registry`, filed under `family`.
void register_deblur_models(Registry<ModelSpec>& registry, const std::string& family);

/// The norm of the deblurring models: instance norm over `channels`, non-affine, no running
/// statistics (DeblurGAN's `InstanceNorm2d(affine=False)`).
torch::nn::InstanceNorm2d instance_norm(int64_t channels);

/// DeblurGAN's initialisation: conv and transposed-conv weights from N(0, 0.02), biases zero.
void init_gan_weights(torch::nn::Module& model);

}  // namespace igb::models::deblur
