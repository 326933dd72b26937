#include "models/deblur/deblur_solver.h"

#include <torch/torch.h>

#include <optional>

#include "core/checkpoint.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/train_mode_guard.h"
#include "models/deblur/deblur_evaluator.h"
#include "models/deblur/deblurgan.h"
#include "models/deblur/perceptual_loss.h"
#include "models/model.h"
#include "models/model_from_checkpoint.h"
#include "models/report_sets.h"

namespace igb::models::deblur {

namespace {

/// The training pairs mapped to [−1, 1].
class SignedPairs : public data::Dataset {
 public:
  explicit SignedPairs(const data::Dataset& pairs) : pairs_(pairs) {}
  int64_t size() const override { return pairs_.size(); }
  data::Example get(int64_t index, int64_t epoch) const override {
    auto e = pairs_.get(index, epoch);
    return {to_signed(e.input), to_signed(e.target)};
  }

 private:
  const data::Dataset& pairs_;
};

data::DeblurDataOptions data_options(const std::string& blur_dir, const std::string& sharp_dir,
                                     uint64_t seed, int64_t patch) {
  data::DeblurDataOptions o;
  o.blur_dir = blur_dir;
  o.sharp_dir = sharp_dir;
  o.seed = seed;
  o.patch_size = patch;
  return o;
}

class DeblurTask : public TrainingTask {
 public:
  DeblurTask(Model model, Model critic, std::unique_ptr<PerceptualLoss> perceptual,
             data::DeblurData data, const DeblurConfig& config, c10::Device device)
      : model_(std::move(model)),
        critic_(std::move(critic)),
        perceptual_(std::move(perceptual)),
        train_data_(std::move(data.train)),
        description_(data.description),
        train_(*train_data_),
        config_(config),
        device_(device),
        evaluator_(std::move(data.val), device, data.description, config.train.data) {
    if (critic_) {
      critic_->to(device_);
      critic_opt_ = std::make_unique<torch::optim::Adam>(
          critic_->parameters(), torch::optim::AdamOptions(config_.critic_lr).betas({0.5, 0.999}));
    }
  }

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return train_; }

  void set_distributed(Distributed& dist) override {
    dist_ = &dist;
    if (critic_) dist.broadcast(critic_->parameters());
  }

  void after_forward(const compress::MinibatchInfo&, const at::Tensor&, const at::Tensor& output,
                     const at::Tensor& target) override {
    if (!critic_) return;
    TrainModeGuard train(*critic_, /*train=*/true);
    const auto fake = output.detach().to(at::kFloat);
    // Real and restored images go through the critic as one batch: its instance norm works per
    // image, so the scores are those of two calls, for one call's overhead.
    const auto both = torch::cat({target, fake});
    const int64_t n = target.size(0);
    for (int64_t i = 0; i < config_.critic_iters; ++i) {
      critic_opt_->zero_grad();
      const auto scores = critic_->forward(both);
      const auto real_score = scores.narrow(0, 0, n), fake_score = scores.narrow(0, n, n);
      at::Tensor loss;
      if (config_.gan == "wgan-gp") {
        const auto gp = gradient_penalty(
            *critic_, [this](const at::Tensor& x) { return critic_->forward(x); }, target, fake);
        loss = fake_score.mean() - real_score.mean() + config_.gp_weight * gp;
        gp_sum_ += gp.item<double>();
      } else {
        loss = 0.5 * (real_score - 1).pow(2).mean() + 0.5 * fake_score.pow(2).mean();
      }
      loss.backward();
      if (dist_) dist_->average(gradients_for_reduction(critic_->parameters()));
      critic_opt_->step();
      critic_sum_ += loss.item<double>();
      ++critic_steps_;
    }
  }

  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    auto content = content_loss(config_.loss, output, target);
    content_sum_ += content.item<double>();
    ++generator_steps_;
    if (perceptual_) {
      const auto perceptual = (*perceptual_)(output, target);
      perceptual_sum_ += perceptual.item<double>();
      content = content + config_.perceptual_weight * perceptual;
    }
    if (!critic_) return content;
    at::Tensor score;
    {
      // The generator's term needs the critic's gradient for its input only: its weights' own
      // gradient (a third of its backward pass) would be thrown away at the next critic step.
      FrozenParameters frozen(*critic_);
      score = critic_->forward(output);
    }
    const auto adv = config_.gan == "wgan-gp" ? -score.mean() : 0.5 * (score - 1).pow(2).mean();
    adv_sum_ += adv.item<double>();
    return content + config_.adv_weight * adv;
  }

  Metrics train_scalars() override {
    Metrics m;
    const auto per = [](double sum, int64_t n) { return n ? sum / static_cast<double>(n) : 0.0; };
    m.emplace_back("content_loss", per(content_sum_, generator_steps_));
    if (perceptual_) m.emplace_back("perceptual_loss", per(perceptual_sum_, generator_steps_));
    if (critic_) {
      m.emplace_back("adversarial_loss", per(adv_sum_, generator_steps_));
      m.emplace_back("critic_loss", per(critic_sum_, critic_steps_));
      if (config_.gan == "wgan-gp") m.emplace_back("gradient_penalty", per(gp_sum_, critic_steps_));
    }
    content_sum_ = perceptual_sum_ = adv_sum_ = critic_sum_ = gp_sum_ = 0;
    generator_steps_ = critic_steps_ = 0;
    return m;
  }

  Metrics validate() override {
    return validation_metrics(evaluate_model(evaluator_, *model_), evaluator_.layout(), {"loss"});
  }
  std::string primary_metric() const override { return "psnr"; }
  std::string secondary_metric() const override { return "ssim"; }
  std::string describe(const Metrics& m) const override {
    return "PSNR " + fixed(metric(m, "psnr"), 2) + " dB  SSIM " + fixed(metric(m, "ssim"), 4) +
           "  (blurred " + fixed(metric(m, "blurred_psnr"), 2) + " dB / " +
           fixed(metric(m, "blurred_ssim"), 4) + ")";
  }
  nlohmann::json summary(const Metrics& last, const Metrics& best) const override {
    return {{"psnr", metric(last, "psnr")},
            {"ssim", metric(last, "ssim")},
            {"best_psnr", metric(best, "psnr")},
            {"best_ssim", metric(best, "ssim")},
            {"blurred_psnr", metric(last, "blurred_psnr")},
            {"blurred_ssim", metric(last, "blurred_ssim")},
            {"gan", config_.gan},
            {"data", description_}};
  }

  bool has_state() const override { return critic_ != nullptr; }
  void save_state(torch::serialize::OutputArchive& archive) const override {
    torch::serialize::OutputArchive weights, optimizer;
    critic_->save(weights);
    critic_opt_->save(optimizer);
    archive.write("critic", weights);
    archive.write("critic_optimizer", optimizer);
    // The critic's name and options, so that a resumed run rebuilds the same one.
    archive.write("critic_model", c10::IValue(config_.critic));
    archive.write("critic_options", c10::IValue(critic_->options_json().dump()));
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    torch::serialize::InputArchive weights, optimizer;
    try {
      archive.read("critic", weights);
      critic_->load(weights);
      archive.read("critic_optimizer", optimizer);
      critic_opt_->load(optimizer);
    } catch (const c10::Error& e) {
      std::string why = e.what_without_backtrace();
      throw InputError("the checkpoint's critic does not match --critic " + config_.critic + ": " +
                       why.substr(0, why.find('\n')));
    }
  }

 private:
  Model model_, critic_;
  std::unique_ptr<PerceptualLoss> perceptual_;
  std::unique_ptr<data::DeblurTrainSet> train_data_;
  std::string description_;
  SignedPairs train_;
  DeblurConfig config_;
  c10::Device device_;
  DeblurEvaluator evaluator_;
  std::unique_ptr<torch::optim::Adam> critic_opt_;
  /// The data-parallel job (critic gradients are averaged over it); null when training alone.
  Distributed* dist_ = nullptr;
  double content_sum_ = 0, perceptual_sum_ = 0, adv_sum_ = 0, critic_sum_ = 0, gp_sum_ = 0;
  int64_t generator_steps_ = 0, critic_steps_ = 0;
};

}  // namespace

at::Tensor content_loss(const std::string& kind, const at::Tensor& output,
                        const at::Tensor& target) {
  if (kind == "l1") return torch::l1_loss(output, target);
  if (kind == "mse") return torch::mse_loss(output, target);
  if (kind == "psnr") {
    // 10·log10 of each image's MSE, averaged: an image's gradient is its MSE's divided by that
    // MSE, so a dB on an image restored well counts as much as a dB on the worst, as in the
    // mean PSNR that validation reports.
    const auto mse = (output - target).pow(2).flatten(1).mean(1);
    return (10 / std::log(10.0)) * torch::log(mse + 1e-8).mean();
  }
  throw InputError("--loss " + kind + ": not one of l1, mse, psnr");
}

void start_near_identity(ModelImpl& model, double scale) {
  auto* gan = dynamic_cast<DeblurGanImpl*>(&model);
  if (!gan) return;
  torch::NoGradGuard no_grad;
  for (size_t i = gan->model->size(); i-- > 0;)
    if (auto* conv = gan->model[i]->as<torch::nn::Conv2d>()) {
      conv->weight.mul_(scale);
      if (conv->bias.defined()) conv->bias.zero_();
      return;
    }
}

at::Tensor gradient_penalty(torch::nn::Module& critic,
                            const std::function<at::Tensor(const at::Tensor&)>& forward,
                            const at::Tensor& real, const at::Tensor& fake) {
  const int64_t n = real.size(0);
  const auto alpha = torch::rand({n, 1, 1, 1}, real.options());
  auto mixed = (alpha * real.detach() + (1 - alpha) * fake.detach()).requires_grad_(true);
  const auto score = forward(mixed);
  const auto grad = torch::autograd::grad({score}, {mixed}, {torch::ones_like(score)},
                                          /*retain_graph=*/true, /*create_graph=*/true)[0];
  return (grad.reshape({n, -1}).norm(2, 1) - 1).pow(2).mean();
}

std::string default_critic(const std::string& generator) {
  return generator == "deblurgan" ? "patchgan" : "patchgan_tiny";
}

std::pair<std::string, nlohmann::json> critic_of_checkpoint(const Checkpoint& ckpt,
                                                            const std::string& generator) {
  torch::serialize::InputArchive state;
  if (!ckpt.task_archive(state)) return {default_critic(generator), nlohmann::json::object()};
  c10::IValue name, options;
  if (state.try_read("critic_model", name) && name.isString() &&
      state.try_read("critic_options", options) && options.isString()) {
    auto parsed = nlohmann::json::parse(options.toStringRef(), nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object()) return {name.toStringRef(), parsed};
  }
  return {generator == "deblurgan" ? "patchgan" : "patchgan_small", nlohmann::json::object()};
}

nlohmann::json train_deblur(const DeblurConfig& requested, RunContext& ctx, const RunInfo& info) {
  DeblurConfig config = requested;
  torch::manual_seed(static_cast<uint64_t>(config.train.seed));
  if (config.patch_size % 4 != 0)
    throw InputError("--patch-size " + std::to_string(config.patch_size) +
                     " is not a multiple of 4 (the generator halves it twice)");
  std::optional<Checkpoint> ckpt;
  Model model;
  if (!config.train.resume.empty()) {
    ckpt = load_checkpoint_for(config.train.resume, info.optform);
    if (ckpt->meta().model != config.train.model)
      throw InputError("checkpoint " + config.train.resume + " holds model '" + ckpt->meta().model +
                       "', but --model is '" + config.train.model + "'");
    model = model_from_checkpoint(*ckpt);
    if (config.critic.empty()) {
      auto [name, options] = critic_of_checkpoint(*ckpt, config.train.model);
      config.critic = name;
      if (config.critic_args.empty()) config.critic_args = options;
    }
  } else {
    check_model_family(config.train.model, info.optform);
    model = create_model(config.train.model, config.model_args);
    start_near_identity(*model);
  }
  // Weights are checked before any data is made.
  std::unique_ptr<PerceptualLoss> perceptual;
  if (!config.perceptual_weights.empty())
    perceptual = std::make_unique<PerceptualLoss>(config.perceptual_weights, ctx.device);
  if (config.critic.empty()) config.critic = default_critic(config.train.model);
  Model critic;
  if (config.gan != "none") {
    check_model_family(config.critic, info.optform);
    critic = create_model(config.critic, config.critic_args);
  }
  auto options =
      data_options(config.blur_dir, config.sharp_dir, config.train.seed, config.patch_size);
  options.max_image_pixels = config.train.max_image_pixels;
  options.blur = config.blur;
  options.fresh_blur = config.fresh_blur;
  options.synthetic_train_images = config.synthetic_train;
  if (config.train.data == "synthetic" && config.blur_dir.empty() &&
      config.patch_size > options.synthetic_size)
    throw InputError("--patch-size " + std::to_string(config.patch_size) + " is larger than the " +
                     std::to_string(options.synthetic_size) + "x" +
                     std::to_string(options.synthetic_size) + " synthetic training images");
  auto data = data::load_deblur_data(config.train.data, options);
  const std::string data_line = "data: " + data.description;
  const std::string model_line =
      "model: " + config.train.model + " " + model->options_json().dump() + ", " +
      std::to_string(count_parameters(*model)) + " parameters; " +
      (critic ? "critic " + config.critic + " " + critic->options_json().dump() + ", " +
                    std::to_string(count_parameters(*critic)) + " parameters, " + config.gan +
                    " (adversarial weight " + fixed(config.adv_weight, 4) + ", " +
                    std::to_string(config.critic_iters) + " critic step(s) a batch)"
              : std::string("no critic (--gan none)"));
  std::vector<std::string> notes;
  // Two folders of pairs replace --data: no report set is the run's own then.
  const std::string own = config.blur_dir.empty() ? config.train.data : config.blur_dir;
  const auto sets = report_set_names(info.optform, own, config.also_eval,
                                     [&](const std::string& line) { notes.push_back(line); });
  EvalData base;
  base.max_image_pixels = config.train.max_image_pixels;
  base.run_config = {{"blur-length", {config.blur.min_length, config.blur.max_length}},
                     {"blur-noise", config.blur.max_noise},
                     {"straight-blur", config.blur.linear_share}};
  DeblurTask task(model, critic, std::move(perceptual), std::move(data), config, ctx.device);
  auto schedule = make_schedule(config.train, *model, ctx.logger, ckpt ? &*ckpt : nullptr);
  Trainer trainer(config.train, ctx, task, *schedule, info);
  if (ckpt) trainer.resume_from(*ckpt);
  trainer.note(data_line);
  trainer.note(model_line);
  trainer.note(config.perceptual_weights.empty()
                   ? "perceptual loss: off (no --perceptual-weights)"
                   : "perceptual loss: VGG-19 conv3_3 features of " + config.perceptual_weights +
                         ", weight " + fixed(config.perceptual_weight, 4));
  for (auto& line : notes) trainer.note(std::move(line));
  auto summary = trainer.run();
  report_best_checkpoint(info.optform, own, sets, make_deblur_evaluator, base, ctx, summary);
  return summary;
}

}  // namespace igb::models::deblur
