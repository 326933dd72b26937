#include "models/sr/sr_solver.h"

#include <iostream>
#include <optional>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/tensor_util.h"
#include "core/train_mode_guard.h"
#include "data/image.h"
#include "data/image_metrics.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

namespace fs = std::filesystem;

SrEvaluation evaluate_sr(ModelImpl& model, const std::vector<data::SrEvalImage>& images,
                         int64_t scale, bool y_channel, const c10::Device& device,
                         const std::string& save_dir,
                         const std::function<at::Tensor(const at::Tensor&)>& forward) {
  torch::NoGradGuard no_grad;
  TrainModeGuard eval(model, /*train=*/false);
  SrEvaluation ev;
  for (const auto& img : images) {
    auto lr = img.lr.unsqueeze(0).to(device);
    auto out = (forward ? forward(lr) : model.forward(lr)).squeeze(0).cpu();
    auto hr_y = data::rgb_to_y(img.hr_rgb);
    at::Tensor sr_y, sr_rgb;
    if (y_channel) {
      sr_y = data::quantize_8bit(out);
      if (!save_dir.empty()) {
        auto ycc = data::rgb_to_ycbcr(img.bicubic_rgb);
        sr_rgb = data::ycbcr_to_rgb(torch::cat({sr_y, ycc.narrow(0, 1, 2)}, 0));
      }
    } else {
      sr_rgb = data::quantize_8bit(out);
      sr_y = data::rgb_to_y(sr_rgb);
    }
    TORCH_CHECK(sr_y.sizes() == hr_y.sizes(), "model output ", sr_y.sizes(), " does not match the ",
                hr_y.sizes(), " ground truth of ", img.name);
    const auto target = y_channel ? hr_y : img.hr_rgb;
    if (out.sizes() == target.sizes())
      ev.loss += torch::mse_loss(out, target).item<double>() / static_cast<double>(images.size());
    auto bic_y = data::rgb_to_y(img.bicubic_rgb);
    SrEvaluation::Row row{img.name, data::psnr(sr_y, hr_y, scale), data::ssim(sr_y, hr_y, scale),
                          data::psnr(bic_y, hr_y, scale), data::ssim(bic_y, hr_y, scale)};
    ev.rows.push_back(row);
    if (!save_dir.empty()) {
      fs::path name = fs::path(img.name).stem().string() + "_x" + std::to_string(scale) + ".png";
      data::write_image(fs::path(save_dir) / name, sr_rgb);
    }
  }
  const double n = static_cast<double>(std::max<size_t>(1, ev.rows.size()));
  for (const auto& r : ev.rows) {
    ev.psnr += r.psnr / n;
    ev.ssim += r.ssim / n;
    ev.bicubic_psnr += r.bicubic_psnr / n;
    ev.bicubic_ssim += r.bicubic_ssim / n;
  }
  return ev;
}

namespace {

class SrTask : public TrainingTask {
 public:
  SrTask(Model model, data::SrData data, const SrConfig& config, c10::Device device)
      : model_(std::move(model)), data_(std::move(data)), config_(config), device_(device) {}

  Model model() override { return model_; }
  const data::Dataset& train_set() const override { return *data_.train; }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return config_.loss == "l1" ? torch::l1_loss(output, target) : torch::mse_loss(output, target);
  }
  Metrics validate() override {
    auto ev = evaluate_sr(*model_, data_.val, config_.upscale, config_.channels == "y", device_);
    return {{"psnr", ev.psnr},
            {"ssim", ev.ssim},
            {"bicubic_psnr", ev.bicubic_psnr},
            {"bicubic_ssim", ev.bicubic_ssim}};
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
            {"data", data_.description}};
  }

 private:
  Model model_;
  data::SrData data_;
  SrConfig config_;
  c10::Device device_;
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
    ckpt = load_checkpoint_for(config.train.resume, "sr");
    if (ckpt->meta().model != config.train.model)
      throw InputError("checkpoint " + config.train.resume + " holds model '" + ckpt->meta().model +
                       "', but --model is '" + config.train.model + "'");
    model = model_from_checkpoint(*ckpt);  // in its thinned shape, if it was thinned
  } else {
    check_model_family(config.train.model, "sr");
    nlohmann::json opts = config.model_args;
    opts["scale"] = config.upscale;
    opts["channels"] = config.channels == "y" ? 1 : 3;
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

  const auto options =
      data_options(config.upscale, config.channels == "y", config.train.seed, config.patch_size);
  // A folder's images are checked against the patch size as they are read.
  if (config.train.data == "synthetic" && config.patch_size > options.synthetic_size)
    throw InputError(
        "--patch-size " + std::to_string(config.patch_size) + " is larger than the " +
        std::to_string(options.synthetic_size) + "x" + std::to_string(options.synthetic_size) +
        " synthetic training images; use at most " + std::to_string(options.synthetic_size));
  auto data = data::load_sr_data(config.train.data, options);
  const std::string data_line = "data: " + data.description;
  const std::string model_line = "model: " + config.train.model + " " +
                                 model->options_json().dump() + ", " +
                                 std::to_string(count_parameters(*model)) + " parameters";

  SrTask task(model, std::move(data), config, ctx.device);
  auto schedule = make_schedule(config.train, *model, ctx.logger, ckpt ? &*ckpt : nullptr);
  Trainer trainer(config.train, ctx, task, *schedule, info);
  if (ckpt) trainer.resume_from(*ckpt);
  trainer.note(data_line);
  trainer.note(model_line);
  return trainer.run();
}

std::function<Metrics()> sr_evaluator(ModelImpl& model, const std::string& data, int64_t images,
                                      const c10::Device& device, std::string* description) {
  auto* sr_model = dynamic_cast<SrModelImpl*>(&model);
  if (!sr_model) throw InputError("the model is not an SR model");
  const int64_t scale = sr_model->scale();
  const bool y = sr_model->channels() == 1;
  auto all = data::load_sr_eval_data(data, data_options(scale, y, 0, 96));
  if (images > 0 && static_cast<size_t>(images) < all.size())
    all.resize(static_cast<size_t>(images));
  if (description)
    *description = std::to_string(all.size()) + " evaluation images of " + data + " (x" +
                   std::to_string(scale) + ")";
  auto kept = std::make_shared<std::vector<data::SrEvalImage>>(std::move(all));
  return [&model, kept, scale, y, device]() -> Metrics {
    const auto ev = evaluate_sr(model, *kept, scale, y, device);
    return {{"psnr", ev.psnr}, {"ssim", ev.ssim}, {"loss", ev.loss}};
  };
}

nlohmann::json test_sr(const SrTestConfig& config, RunContext& ctx) {
  Checkpoint ckpt = load_checkpoint_for(config.checkpoint, "sr");
  Model model = model_from_checkpoint(ckpt);
  auto* sr_model = dynamic_cast<SrModelImpl*>(model.get());
  if (!sr_model) throw InputError("checkpoint " + config.checkpoint + " does not hold an SR model");
  model->to(ctx.device);
  const int64_t scale = sr_model->scale();
  const bool y = sr_model->channels() == 1;
  if (config.self_ensemble && (config.quantize_eval.enabled() || config.external.enabled()))
    throw InputError("--self-ensemble evaluates the checkpoint's own model only: leave out " +
                     std::string(config.external.enabled() ? "--onnx" : "--quantize-eval"));
  auto images = data::load_sr_eval_data(config.data, data_options(scale, y, 0, 96));

  std::function<at::Tensor(const at::Tensor&)> ensemble;
  if (config.self_ensemble)
    ensemble = [&model](const at::Tensor& x) {
      return geometric_self_ensemble([&model](const at::Tensor& t) { return model->forward(t); },
                                     x);
    };
  auto ev = evaluate_sr(*model, images, scale, y, ctx.device, config.save_images, ensemble);
  // The external model runs before anything is printed, so a shape it refuses is the one line.
  SrEvaluation eev;
  if (config.external.enabled())
    eev = evaluate_sr(*model, images, scale, y, ctx.device, {}, config.external.forward);
  Table table;
  table.columns = {"Image", "PSNR (dB)", "SSIM", "Bicubic PSNR (dB)", "Bicubic SSIM"};
  nlohmann::json per_image = nlohmann::json::array();
  for (const auto& r : ev.rows) {
    table.rows.push_back({r.name, fixed(r.psnr, 2), fixed(r.ssim, 4), fixed(r.bicubic_psnr, 2),
                          fixed(r.bicubic_ssim, 4)});
    per_image.push_back({{"image", r.name},
                         {"psnr", r.psnr},
                         {"ssim", r.ssim},
                         {"bicubic_psnr", r.bicubic_psnr},
                         {"bicubic_ssim", r.bicubic_ssim}});
  }
  table.rows.push_back({"mean", fixed(ev.psnr, 2), fixed(ev.ssim, 4), fixed(ev.bicubic_psnr, 2),
                        fixed(ev.bicubic_ssim, 4)});
  std::cout << table.to_text();
  std::cout << "PSNR gain over bicubic: " << fixed(ev.psnr - ev.bicubic_psnr, 2) << " dB (x"
            << scale << ", " << (y ? "Y" : "RGB→Y") << ", border " << scale
            << (config.self_ensemble ? ", x8 self-ensemble" : "") << ")\n";

  nlohmann::json summary = {{"optform", "sr"},
                            {"checkpoint", config.checkpoint},
                            {"model", ckpt.meta().model},
                            {"epoch", ckpt.meta().epoch},
                            {"upscale", scale},
                            {"data", config.data},
                            {"images", ev.rows.size()},
                            {"psnr", ev.psnr},
                            {"ssim", ev.ssim},
                            {"bicubic_psnr", ev.bicubic_psnr},
                            {"bicubic_ssim", ev.bicubic_ssim},
                            {"self_ensemble", config.self_ensemble},
                            {"per_image", per_image}};
  fs::path out =
      config.out.empty() ? fs::path(config.checkpoint).parent_path() : fs::path(config.out);
  if (out.empty()) out = ".";
  if (config.quantize_eval.enabled()) {
    nlohmann::json info;
    auto q = compress::quantize_for_eval(
        config.quantize_eval, *model, model->input_shape(),
        [&](const at::Tensor& x) { return model->forward(x); },
        [&](const compress::PostTrainLinearQuantizer::Forward& f, int64_t n) {
          const auto count = std::min<size_t>(images.size(), static_cast<size_t>(n));
          for (size_t i = 0; i < count; ++i) f(images[i].lr.unsqueeze(0).to(ctx.device));
        },
        out, *ctx.logger, &info);
    auto qev = evaluate_sr(*model, images, scale, y, ctx.device, {},
                           [&](const at::Tensor& x) { return q->forward(x); });
    Table cmp;
    cmp.columns = {"Model", "PSNR (dB)", "SSIM"};
    cmp.rows.push_back({"FP32", fixed(ev.psnr, 2), fixed(ev.ssim, 4)});
    cmp.rows.push_back({info["label"].get<std::string>(), fixed(qev.psnr, 2), fixed(qev.ssim, 4)});
    cmp.rows.push_back({"difference", fixed(qev.psnr - ev.psnr, 2), fixed(qev.ssim - ev.ssim, 4)});
    std::cout << "Post-training quantization (" << config.quantize_eval.schedule << ")\n"
              << cmp.to_text();
    info["fp32"] = {{"psnr", ev.psnr}, {"ssim", ev.ssim}};
    info["quantized"] = {{"psnr", qev.psnr}, {"ssim", qev.ssim}};
    info["psnr_drop"] = ev.psnr - qev.psnr;
    summary["quantize_eval"] = info;
  }
  if (config.external.enabled()) {
    Table cmp;
    cmp.columns = {"Model", "PSNR (dB)", "SSIM"};
    cmp.rows.push_back({"checkpoint (LibTorch)", fixed(ev.psnr, 3), fixed(ev.ssim, 4)});
    cmp.rows.push_back({config.external.label, fixed(eev.psnr, 3), fixed(eev.ssim, 4)});
    cmp.rows.push_back({"difference", fixed(eev.psnr - ev.psnr, 3), fixed(eev.ssim - ev.ssim, 4)});
    std::cout << config.external.label << " (" << config.external.source << ")\n" << cmp.to_text();
    summary["onnx"] = {{"runtime", config.external.label},
                       {"model", config.external.source},
                       {"psnr", eev.psnr},
                       {"ssim", eev.ssim},
                       {"psnr_difference", eev.psnr - ev.psnr}};
  }
  write_text_atomically(out / "test_summary.json", summary.dump(2) + "\n");
  ctx.logger->info("wrote " + (out / "test_summary.json").string());
  return summary;
}

}  // namespace igb::models::sr
