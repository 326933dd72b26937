#include "models/sr/sr_solver.h"

#include <optional>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/table.h"
#include "data/sr_data.h"
#include "models/import/imported_options.h"
#include "models/model_from_checkpoint.h"
#include "models/report_sets.h"
#include "models/sr/sr_evaluator.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

namespace {

class SrTask : public TrainingTask {
 public:
  SrTask(Model model, data::SrData data, const SrConfig& config, c10::Device device)
      : model_(std::move(model)),
        train_(std::move(data.train)),
        description_(data.description),
        config_(config),
        evaluator_(std::move(data.val), config.upscale, config.channels == "y", device,
                   data.description, config.train.data) {}

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *train_; }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return config_.loss == "l1" ? torch::l1_loss(output, target) : torch::mse_loss(output, target);
  }
  Metrics validate() override {
    return validation_metrics(evaluate_model(evaluator_, *model_), evaluator_.layout(), {"loss"});
  }
  std::string primary_metric() const override { return "psnr"; }
  std::string secondary_metric() const override { return "ssim"; }
  std::string describe(const Metrics& m) const override {
    return "PSNR " + fixed(metric(m, "psnr"), 2) + " dB  SSIM " + fixed(metric(m, "ssim"), 4) +
           "  (bicubic " + fixed(metric(m, "bicubic_psnr"), 2) + " dB / " +
           fixed(metric(m, "bicubic_ssim"), 4) + ")";
  }
  nlohmann::json summary(const Metrics& last, const Metrics& best) const override {
    return {{"psnr", metric(last, "psnr")},
            {"ssim", metric(last, "ssim")},
            {"best_psnr", metric(best, "psnr")},
            {"best_ssim", metric(best, "ssim")},
            {"bicubic_psnr", metric(last, "bicubic_psnr")},
            {"bicubic_ssim", metric(last, "bicubic_ssim")},
            {"upscale", config_.upscale},
            {"channels", config_.channels},
            {"data", description_}};
  }

 private:
  Model model_;
  std::unique_ptr<data::SrTrainSet> train_;
  std::string description_;
  SrConfig config_;
  SrEvaluator evaluator_;
};

data::SrDataOptions data_options(int64_t scale, bool y, uint64_t seed, int64_t patch) {
  data::SrDataOptions o;
  o.scale = scale;
  o.y_channel = y;
  o.seed = seed;
  o.patch_size = patch;
  return o;
}

}  // namespace

nlohmann::json train_sr(const SrConfig& config, RunContext& ctx, const RunInfo& info) {
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  std::optional<Checkpoint> ckpt;
  Model model;
  if (!config.train.resume.empty()) {
    ckpt = load_checkpoint_for(config.train.resume, info.optform);
    if (ckpt->meta().model != config.train.model)
      throw InputError("checkpoint " + config.train.resume + " holds model '" + ckpt->meta().model +
                       "', but --model is '" + config.train.model + "'");
    model = model_from_checkpoint(*ckpt);  // in its thinned shape, if it was thinned
  } else {
    check_model_family(config.train.model, info.optform);
    nlohmann::json opts = config.model_args;
    opts["scale"] = config.upscale;
    opts["channels"] = config.channels == "y" ? 1 : 3;
    // A model brought as a file is one of this family's: it takes the family's 32x32 patches
    // (ImportHook::input_size), whatever sizes the file leaves open.
    if (is_imported_model(config.train.model) && !opts.contains("family")) opts["family"] = "sr";
    model = create_model(config.train.model, opts);
  }
  auto* sr_model = dynamic_cast<SrModelImpl*>(model.get());
  if (!sr_model)
    throw InputError("model '" + config.train.model + "' is not a super-resolution model");
  if (sr_model->scale() != config.upscale ||
      sr_model->channels() != (config.channels == "y" ? 1 : 3))
    throw InputError("checkpoint " + config.train.resume + " was trained at x" +
                     std::to_string(sr_model->scale()) + " on " +
                     (sr_model->channels() == 1 ? "y" : "rgb") +
                     "; --upscale and --channels must match");

  auto options =
      data_options(config.upscale, config.channels == "y", config.train.seed, config.patch_size);
  options.max_image_pixels = config.train.max_image_pixels;
  const bool generated = config.train.data == "synthetic" || config.train.data == "dead-leaves";
  options.patch_candidates =
      config.patch_candidates > 0 ? config.patch_candidates : (generated ? 1 : 3);
  // A folder's images are checked against the patch size as they are read.
  if (generated && config.patch_size > options.synthetic_size)
    throw InputError(
        "--patch-size " + std::to_string(config.patch_size) + " is larger than the " +
        std::to_string(options.synthetic_size) + "x" + std::to_string(options.synthetic_size) +
        " synthetic training images; use at most " + std::to_string(options.synthetic_size));
  auto data = data::load_sr_data(config.train.data, options);
  const std::string data_line = "data: " + data.description;
  const std::string model_line = "model: " + config.train.model + " " +
                                 model->options_json().dump() + ", " +
                                 std::to_string(count_parameters(*model)) + " parameters";

  std::vector<std::string> notes;
  const auto sets = report_set_names(info.optform, config.train.data, config.also_eval,
                                     [&](const std::string& line) { notes.push_back(line); });
  EvalData base;
  base.max_image_pixels = config.train.max_image_pixels;
  SrTask task(model, std::move(data), config, ctx.device);
  auto schedule = make_schedule(config.train, *model, ctx.logger, ckpt ? &*ckpt : nullptr);
  Trainer trainer(config.train, ctx, task, *schedule, info);
  if (ckpt) trainer.resume_from(*ckpt);
  trainer.note(data_line);
  trainer.note(model_line);
  for (auto& line : notes) trainer.note(std::move(line));
  auto summary = trainer.run();
  report_best_checkpoint(info.optform, config.train.data, sets, make_sr_evaluator, base, ctx,
                         summary);
  return summary;
}

}  // namespace igb::models::sr
