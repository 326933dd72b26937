// The deblurring family (--optform=deblur): a DeblurGAN generator trained against a critic on
// blurred/sharp pairs; its option set, evaluator and synthetic inputs.
#include "models/deblur/deblur_family.h"

#include <CLI/CLI.hpp>

#include "core/cli.h"
#include "core/error.h"
#include "core/table.h"
#include "models/deblur/deblur_evaluator.h"
#include "models/deblur/deblur_models.h"
#include "models/deblur/deblur_solver.h"
#include "models/family_parts.h"
#include "models/report_sets.h"

namespace igb::models::deblur {

namespace {

constexpr char kName[] = "deblur";

class DeblurOptions : public FamilyOptions {
 public:
  void set_train_defaults(TrainConfig& train) const override {
    // The defaults: deblurgan_small on the training photographs (Debian's opencv-doc) under
    // synthetic motion blur, 1.3 dB above the blurred input on the held-out ones in about 15
    // minutes on two cores (docs/igb-train.md).
    set_photo_train_defaults(train, "deblurgan_small", /*epochs=*/100, /*batch_size=*/8,
                             /*lr=*/1e-3);
  }

  void add_train_options(CLI::App& app) override {
    add_patch_size_option(app, config_.patch_size,
                          "Training crop side in pixels (a multiple of 4)");
    app.add_option("--blur-dir", config_.blur_dir,
                   "Folder of blurred images (with --sharp-dir, pairs by file name) instead of "
                   "--data");
    app.add_option("--sharp-dir", config_.sharp_dir, "Folder of the sharp partners");
    app.add_option("--blur-length", blur_length_,
                   "Synthetic data: shortest and longest motion path in pixels")
        ->expected(2)
        ->capture_default_str();
    real_range(app.add_option("--blur-noise", config_.blur.max_noise,
                              "Synthetic data: largest noise sigma (on [0, 1])")
                   ->capture_default_str(),
               0, 1);
    real_range(app.add_option("--straight-blur", config_.blur.linear_share,
                              "Synthetic data: share of straight kernels (the rest camera shake)")
                   ->capture_default_str(),
               0, 1);
    int_range(app.add_option("--synthetic-train", config_.synthetic_train,
                             "Synthetic data: sharp training images the crops are cut from")
                  ->capture_default_str(),
              1, 1000000);
    app.add_flag("--fixed-blur", fixed_blur_,
                 "Synthetic data: crop each image's one blurred version instead of blurring "
                 "every training crop anew");
    app.add_option("--loss", config_.loss,
                   "Content loss: l1, mse, or psnr (the mean over images of 10·log10 MSE)")
        ->capture_default_str()
        ->check(CLI::IsMember({"l1", "mse", "psnr"}));
    app.add_option("--gan", config_.gan, "Adversarial loss")
        ->capture_default_str()
        ->check(CLI::IsMember({"wgan-gp", "lsgan", "none"}));
    int_range(app.add_option("--critic-iters", config_.critic_iters,
                             "Critic steps per generator step, on the same batch")
                  ->capture_default_str(),
              1, 100);
    real_range(app.add_option("--gp-weight", config_.gp_weight, "WGAN-GP's penalty weight")
                   ->capture_default_str(),
               0, 1e6);
    real_range(app.add_option("--adv-weight", config_.adv_weight,
                              "Weight of the adversarial term against the content loss")
                   ->capture_default_str(),
               0, 1e6);
    app.add_option("--critic", config_.critic,
                   "The critic model (deblur family); default patchgan for deblurgan, "
                   "patchgan_tiny (ndf 8) for other generators, or the resumed run's critic");
    app.add_option("--critic-arg", critic_args_, "Critic option KEY=VALUE, repeatable (ndf)");
    real_range(app.add_option("--critic-lr", config_.critic_lr, "The critic's Adam learning rate")
                   ->capture_default_str(),
               0, 10, /*min_excluded=*/true);
    app.add_option("--perceptual-weights", config_.perceptual_weights,
                   "VGG-19 weights (a LibTorch archive of its features up to conv3_3) for "
                   "DeblurGAN's perceptual loss; without it the loss is off");
    real_range(app.add_option("--perceptual-weight", config_.perceptual_weight,
                              "Weight of the perceptual loss against the content loss")
                   ->capture_default_str(),
               0, 1e6);
    app.add_option("--model-arg", model_args_,
                   "Generator option KEY=VALUE, repeatable (ngf, blocks, dropout)");
    add_also_eval_option(app, config_.also_eval);
  }

  nlohmann::json run_train(const TrainConfig& train, const CLI::App& app, RunContext& ctx,
                           const RunInfo& info) override {
    config_.train = train;
    // The two folders are the data: with --data too, one of them would be ignored.
    if ((!config_.blur_dir.empty() || !config_.sharp_dir.empty()) && app.count("--data") > 0)
      throw InputError("--blur-dir and --sharp-dir are the training data; give them or --data " +
                       config_.train.data + ", not both");
    config_.fresh_blur = !fixed_blur_;
    config_.blur.min_length = blur_length_[0];
    config_.blur.max_length = blur_length_[1];
    const double longest = static_cast<double>(config_.blur.kernel_size);
    if (!(blur_length_[0] >= 1 && blur_length_[0] <= blur_length_[1] && blur_length_[1] <= longest))
      throw InputError("--blur-length " + fixed(blur_length_[0], 1) + " " +
                       fixed(blur_length_[1], 1) +
                       ": needs 1 <= MIN <= MAX <= " + fixed(longest, 0) + " (the kernel side)");
    config_.model_args = parse_model_args(model_args_);
    config_.critic_args = parse_model_args(critic_args_);
    if (!critic_args_.empty() && config_.gan == "none")
      throw InputError("--critic-arg has no critic to configure with --gan none");
    if (!config_.train.resume.empty()) inherit_resumed_run(config_.train, config_.model_args, app);
    return train_deblur(config_, ctx, info);
  }

  void add_test_options(CLI::App& app, TestRequest& request) override {
    app.add_option("--save-images", request.save_images,
                   "Folder to write the restored images (PNG) to");
    auto& options = request.data.options;
    // The folders are the data tested on: named so, the report sets all evaluate beside them.
    app.add_option_function<std::string>(
        "--blur-dir",
        [&request](const std::string& v) {
          request.data.options["blur_dir"] = v;
          request.data.data = v;
        },
        "Folder of blurred images (with --sharp-dir) instead of --data");
    app.add_option_function<std::string>(
        "--sharp-dir", [&options](const std::string& v) { options["sharp_dir"] = v; },
        "Folder of the sharp partners");
    add_self_ensemble_options(app, request,
                              "Restore each image as the mean of the generator's outputs");
  }

 private:
  DeblurConfig config_;
  std::vector<std::string> model_args_, critic_args_;
  std::vector<double> blur_length_{data::MotionBlurOptions().min_length,
                                   data::MotionBlurOptions().max_length};
  bool fixed_blur_ = false;
};

/// A synthetic image deblurring data is made of, mapped to the generator's [−1, 1].
at::Tensor to_deblur_input(const at::Tensor& rgb, int64_t channels) {
  return to_signed(channels == 3 ? rgb : grey_channels(rgb, channels));
}

}  // namespace

Family deblur_family() {
  Family f;
  f.name = kName;
  f.help = "deblurring: DeblurGAN generator against a PatchGAN critic; PSNR (RGB), SSIM (Y)";
  f.make_options = [] { return std::make_unique<DeblurOptions>(); };
  f.register_models = [](Registry<ModelSpec>& r) { register_deblur_models(r, kName); };
  f.make_evaluator = make_deblur_evaluator;
  f.layout = DeblurEvaluator::base_layout();
  f.synthetic_inputs = synthetic_image_inputs(to_deblur_input);
  return f;
}

}  // namespace igb::models::deblur
