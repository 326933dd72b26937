#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/run_context.h"
#include "data/deblur_data.h"
#include "models/trainer.h"

namespace igb::models::deblur {

/// Options of `igb-train --optform=deblur`.
struct DeblurConfig {
  TrainConfig train;
  /// Side of the training crops in pixels (a multiple of 4).
  int64_t patch_size = 64;
  /// Two folders of pairs instead of --data.
  std::string blur_dir, sharp_dir;
  /// The synthetic data's motion blur (--blur-length, --blur-noise, --straight-blur) and whether
  /// each training crop gets a fresh one (--fixed-blur turns that off).
  data::MotionBlurOptions blur;
  bool fresh_blur = true;
  /// Sharp images the synthetic training pairs are cut from (--synthetic-train).
  int64_t synthetic_train = data::DeblurDataOptions().synthetic_train_images;
  /// Content loss between the restored and the sharp image: "l1", "mse" or "psnr" (content_loss).
  std::string loss = "l1";
  /// Adversarial loss: "wgan-gp", "lsgan" or "none".
  std::string gan = "lsgan";
  /// Critic steps per generator step, on the same batch (DeblurGAN's critic_updates).
  int64_t critic_iters = 1;
  /// WGAN-GP's gradient penalty weight λ.
  double gp_weight = 10;
  /// Weight of the adversarial term against the content loss. DeblurGAN weighs its perceptual
  /// loss 100 : 1 against the critic; against a pixel loss, whose gradient per pixel is far
  /// smaller than a WGAN critic's, 0.01 lets the critic outweigh the content and costs PSNR.
  double adv_weight = 1e-4;
  /// The critic: a registry model of the deblur family (empty: default_critic of the generator),
  /// its options, its Adam learning rate.
  std::string critic;
  nlohmann::json critic_args = nlohmann::json::object();
  double critic_lr = 1e-4;
  /// VGG-19 weights for the perceptual loss (a LibTorch archive); empty = no perceptual loss.
  std::string perceptual_weights;
  /// Weight of the perceptual loss against the content loss.
  double perceptual_weight = 1;
  /// Report sets scored besides --data (--also-eval); empty: the installed ones.
  std::vector<std::string> also_eval;
  /// Extra generator options (--model-arg).
  nlohmann::json model_args = nlohmann::json::object();
};

/// The content loss of restored images against sharp ones, both [N, C, H, W] on [−1, 1]: "l1"
/// and "mse" over all pixels; "psnr", the mean over images of 10·log10(MSE + 1e-8), each image's
/// PSNR negated up to a constant (the PSNR loss of HINet and NAFNet). Another kind is an
/// InputError.
at::Tensor content_loss(const std::string& kind, const at::Tensor& output,
                        const at::Tensor& target);

/// Gradient penalty of WGAN-GP: the mean over the batch of (‖∇_x̂ critic(x̂)‖₂ − 1)² at x̂ = α·real +
/// (1 − α)·fake with α ~ U[0, 1] per sample, through double backward (the graph is kept, so the
/// penalty's gradient reaches the critic's weights).
at::Tensor gradient_penalty(torch::nn::Module& critic,
                            const std::function<at::Tensor(const at::Tensor&)>& forward,
                            const at::Tensor& real, const at::Tensor& fake);

/// Scales a DeblurGAN generator's last convolution's weights by `scale` and zeroes its bias, so a
/// fresh run starts near the identity (clamp(input + tanh(small))) and learns the correction from
/// there. DeblurGAN's code draws that conv from N(0, 0.02) like every conv, which starts below the
/// blurred input and learns markedly slower; a zeroed one (scale 0) is the exact identity but
/// passes no gradient to the layers before it until it has grown, and the first epochs gain
/// nothing; 0.1 (N(0, 0.002)) does neither (docs/igb-train.md). Other models are left as they are.
void start_near_identity(ModelImpl& model, double scale = 0.1);

/// The critic a generator trains against when --critic is not given: `patchgan` (ndf 64, as
/// DeblurGAN) for `deblurgan`, `patchgan_tiny` (ndf 8) for the others, so that the critic of a
/// small generator does not cost a large share of its generator's step.
std::string default_critic(const std::string& generator);

/// The critic (registry name and options) a run resumed from `ckpt` trains against when --critic
/// is not given: the one its task state records; for a checkpoint written before critics were
/// recorded, the default of then (`patchgan` for `deblurgan`, `patchgan_small` otherwise); for a
/// checkpoint without a critic (--gan none), default_critic with default options.
std::pair<std::string, nlohmann::json> critic_of_checkpoint(const Checkpoint& ckpt,
                                                            const std::string& generator);

/// Trains a deblurring generator (and its critic) as `config` says; returns summary.json.
nlohmann::json train_deblur(const DeblurConfig& config, RunContext& ctx, const RunInfo& info);

}  // namespace igb::models::deblur
