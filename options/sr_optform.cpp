// --optform=sr: super-resolution training and testing.
#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "core/error.h"
#include "models/sr/sr_solver.h"
#include "options/common_options.h"
#include "options/optform.h"

namespace igb::options {

namespace {

class SrOptForm : public OptForm {
 public:
  std::string default_model() const override { return "fsrcnn"; }

  void add_train_options(CLI::App& app, models::TrainConfig& train) override {
    app_ = &app;
    train_ = &train;
    // The defaults are the main job: FSRCNN x3 on synthetic data, well above bicubic in minutes.
    train.epochs = 36;
    train.lr_decay = "cosine";
    train.batch_size = 16;
    train.lr = 2e-3;
    train.optimizer = "adam";
    add_common_train_options(app, train);
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
    app.add_option("--loss", config_.loss, "Training loss")
        ->capture_default_str()
        ->check(CLI::IsMember({"mse", "l1"}));
    app.add_option("--model-arg", model_args_,
                   "Model option KEY=VALUE, repeatable (fsrcnn: d, s, m; vdsr: depth)");
  }

  nlohmann::json run_train(RunContext& ctx, const std::string& config_yaml,
                           const nlohmann::json& config_json) override {
    config_.train = *train_;
    config_.model_args = parse_model_args(model_args_);
    if (!config_.train.resume.empty()) inherit_from_checkpoint();
    if (config_.patch_size % config_.upscale != 0)
      throw InputError("--patch-size " + std::to_string(config_.patch_size) +
                       " is not a multiple of --upscale " + std::to_string(config_.upscale));
    models::RunInfo info{"sr", config_yaml, config_json};
    return models::sr::train_sr(config_, ctx, info);
  }

  void add_test_options(CLI::App& app) override {
    app.add_option("--save-images", save_images_,
                   "Folder to write the super-resolved images (PNG) to");
    app.add_flag("--self-ensemble", self_ensemble_,
                 "Super-resolve each image as the mean of the model's outputs on its eight flips "
                 "and transposes (8x the cost; not with --quantize-eval or --onnx)");
  }

  std::function<models::Metrics()> evaluator(models::ModelImpl& model, const std::string& data,
                                             int64_t batches, const c10::Device& device,
                                             std::string* description) override {
    return models::sr::sr_evaluator(model, data, batches, device, description);
  }

  nlohmann::json run_test(RunContext& ctx, const std::string& checkpoint, const std::string& data,
                          const std::string& out,
                          const compress::QuantizeEvalRequest& quantize_eval,
                          const models::ExternalForward& external) override {
    if (!save_images_.empty()) check_output_folder("--save-images", save_images_);
    models::sr::SrTestConfig t;
    t.checkpoint = checkpoint;
    t.data = data;
    t.out = out;
    t.save_images = save_images_;
    t.quantize_eval = quantize_eval;
    t.external = external;
    t.self_ensemble = self_ensemble_;
    return models::sr::test_sr(t, ctx);
  }

 private:
  // A resumed run takes model, scale and channels from its checkpoint unless they were given.
  void inherit_from_checkpoint() {
    auto ckpt = Checkpoint::load(config_.train.resume);
    check_model_args_match(config_.model_args, ckpt);
    const auto& opts = ckpt.meta().model_options;
    if (!app_->get_option("--model")->count()) config_.train.model = ckpt.meta().model;
    if (!app_->get_option("--upscale")->count() && opts.contains("scale"))
      config_.upscale = opts["scale"].get<int64_t>();
    if (!app_->get_option("--channels")->count() && opts.contains("channels"))
      config_.channels = opts["channels"].get<int64_t>() == 1 ? "y" : "rgb";
  }

  CLI::App* app_ = nullptr;
  models::TrainConfig* train_ = nullptr;
  models::sr::SrConfig config_;
  std::vector<std::string> model_args_;
  std::string save_images_;
  bool self_ensemble_ = false;
};

}  // namespace

std::unique_ptr<OptForm> make_sr_optform() { return std::make_unique<SrOptForm>(); }

}  // namespace igb::options
