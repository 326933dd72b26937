// The super-resolution family (--optform=sr): its option set, evaluator and synthetic inputs.
#include "models/sr/sr_family.h"

#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "core/cli.h"
#include "core/error.h"
#include "data/synthetic_images.h"
#include "models/model_from_checkpoint.h"
#include "models/report_sets.h"
#include "models/sr/sr_evaluator.h"
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
    train.model = "fsrcnn";
    train.data = "photos";
    train.epochs = 36;
    train.lr_decay = "cosine";
    train.batch_size = 16;
    train.lr = 4e-3;
    train.optimizer = "adam";
  }

  void add_train_options(CLI::App& app) override {
    app.add_option("--upscale", config_.upscale, "Upscaling factor")
        ->capture_default_str()
        ->check(CLI::IsMember({2, 3, 4}));
    int_range(app.add_option("--patch-size", config_.patch_size,
                             "High-resolution training patch side in pixels (a multiple of "
                             "--upscale)")
                  ->capture_default_str(),
              8, 4096);
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
    app.add_flag("--self-ensemble", request.self_ensemble,
                 "Super-resolve each image as the mean of the model's outputs on its eight flips "
                 "and transposes (8x the cost; not with --quantize-eval or --onnx)");
    add_also_eval_option(app, request.also_eval);
  }

 private:
  // A resumed run takes model, data, scale and channels from its checkpoint unless they were
  // given.
  void inherit_from_checkpoint(const CLI::App& app) {
    auto ckpt = Checkpoint::load(config_.train.resume);
    check_model_args_match(config_.model_args, ckpt);
    const auto& opts = ckpt.meta().model_options;
    if (!app.get_option("--model")->count()) config_.train.model = ckpt.meta().model;
    config_.train.data =
        resumed_data(config_.train.data, app.get_option("--data")->count() > 0, ckpt);
    if (!app.get_option("--upscale")->count() && opts.contains("scale"))
      config_.upscale = opts["scale"].get<int64_t>();
    if (!app.get_option("--channels")->count() && opts.contains("channels"))
      config_.channels = opts["channels"].get<int64_t>() == 1 ? "y" : "rgb";
  }

  SrConfig config_;
  std::vector<std::string> model_args_;
};

/// The synthetic images SR data is made of, at the input's size, one image a batch, in the
/// model's channels (1: luma).
void synthetic_inputs(const std::vector<int64_t>& in, int64_t batches,
                      const std::function<void(const at::Tensor&)>& f) {
  for (int64_t b = 0; b < batches; ++b) {
    auto rgb = data::render_synthetic_image(in[2], in[3], static_cast<uint64_t>(1000 + b));
    if (in[1] == 1)
      rgb = (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
    else if (in[1] != 3)
      rgb = rgb.mean(0, true).expand({in[1], in[2], in[3]}).contiguous();
    f(rgb.unsqueeze(0));
  }
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
  f.synthetic_inputs = synthetic_inputs;
  return f;
}

}  // namespace igb::models::sr
