// The super-resolution family (--optform=sr): its option set, evaluator and synthetic inputs.
#include "models/sr/sr_family.h"

#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "core/cli.h"
#include "core/error.h"
#include "models/family_parts.h"
#include "models/report_sets.h"
#include "models/sr/sr_evaluator.h"
#include "models/sr/sr_import.h"
#include "models/sr/sr_models.h"
#include "models/sr/sr_solver.h"

namespace igb::models::sr {

namespace {

constexpr char kName[] = "sr";

class SrOptions : public FamilyOptions {
 public:
  void set_train_defaults(TrainConfig& train) const override {
    // The defaults are the main job: FSRCNN x3 on photographs (Debian's opencv-doc), 1.4 dB
    // above bicubic on the held-out ones (docs/data.md). 4e-3 suits them (2e-3 gave 1.05-1.07
    // dB); the figures on synthetic data in docs/ were measured at 2e-3.
    set_photo_train_defaults(train, "fsrcnn", /*epochs=*/36, /*batch_size=*/16, /*lr=*/4e-3);
  }

  void add_train_options(CLI::App& app) override {
    app.add_option("--upscale", config_.upscale, "Upscaling factor")
        ->capture_default_str()
        ->check(CLI::IsMember({2, 3, 4}));
    add_patch_size_option(app, config_.patch_size,
                          "High-resolution training patch side in pixels (a multiple of "
                          "--upscale)");
    app.add_option("--channels", config_.channels, "Train on luma (y) or on rgb; metrics are on Y")
        ->capture_default_str()
        ->check(CLI::IsMember({"y", "rgb"}));
    int_range(app.add_option("--patch-candidates", config_.patch_candidates,
                             "Random crops each training patch is chosen from, the most detailed "
                             "kept (0: 3 for photographs, 1 for generated images)")
                  ->capture_default_str(),
              0, 64);
    app.add_option("--loss", config_.loss, "Training loss")
        ->capture_default_str()
        ->check(CLI::IsMember({"mse", "l1"}));
    app.add_option("--model-arg", model_args_,
                   "Model option KEY=VALUE, repeatable (fsrcnn: d, s, m; vdsr: depth)");
    add_also_eval_option(app, config_.also_eval);
  }

  nlohmann::json run_train(const TrainConfig& train, const CLI::App& app, RunContext& ctx,
                           const RunInfo& info) override {
    config_.train = train;
    config_.model_args = parse_model_args(model_args_);
    if (!config_.train.resume.empty()) inherit_from_checkpoint(app);
    if (config_.patch_size % config_.upscale != 0)
      throw InputError("--patch-size " + std::to_string(config_.patch_size) +
                       " is not a multiple of --upscale " + std::to_string(config_.upscale));
    return train_sr(config_, ctx, info);
  }

  void add_test_options(CLI::App& app, TestRequest& request) override {
    app.add_option("--save-images", request.save_images,
                   "Folder to write the super-resolved images (PNG) to");
    add_self_ensemble_options(app, request,
                              "Super-resolve each image as the mean of the model's outputs");
  }

 private:
  // A resumed run takes model, data, scale and channels from its checkpoint unless they were
  // given.
  void inherit_from_checkpoint(const CLI::App& app) {
    const auto ckpt = inherit_resumed_run(config_.train, config_.model_args, app);
    const auto& opts = ckpt.meta().model_options;
    if (!app.get_option("--upscale")->count() && opts.contains("scale"))
      config_.upscale = opts["scale"].get<int64_t>();
    if (!app.get_option("--channels")->count() && opts.contains("channels"))
      config_.channels = opts["channels"].get<int64_t>() == 1 ? "y" : "rgb";
  }

  SrConfig config_;
  std::vector<std::string> model_args_;
};

/// A synthetic image SR data is made of in the model's channels (1: luma).
at::Tensor to_sr_input(const at::Tensor& rgb, int64_t channels) {
  if (channels == 1) return (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
  return channels == 3 ? rgb : grey_channels(rgb, channels);
}

}  // namespace

Family sr_family() {
  Family f;
  f.name = kName;
  f.help = "super-resolution: srcnn, fsrcnn, espcn, vdsr; PSNR/SSIM on Y";
  f.make_options = [] { return std::make_unique<SrOptions>(); };
  f.register_models = [](Registry<ModelSpec>& r) { register_sr_models(r, kName); };
  f.make_evaluator = make_sr_evaluator;
  f.layout = SrEvaluator::base_layout();
  f.synthetic_inputs = synthetic_image_inputs(to_sr_input);
  f.import_hook = sr_import_hook(kName);
  return f;
}

}  // namespace igb::models::sr
