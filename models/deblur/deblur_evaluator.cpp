#include "models/deblur/deblur_evaluator.h"

#include <filesystem>

#include "core/error.h"
#include "data/image.h"
#include "data/image_metrics.h"

namespace igb::models::deblur {

namespace fs = std::filesystem;

at::Tensor crop4(const at::Tensor& image) {
  return image.narrow(-2, 0, image.size(-2) - image.size(-2) % 4)
      .narrow(-1, 0, image.size(-1) - image.size(-1) % 4);
}

data::MotionBlurOptions blur_of_run(const nlohmann::json& config) {
  data::MotionBlurOptions b;
  if (!config.is_object()) return b;
  const auto number = [&](const char* key, double& out) {
    if (config.contains(key) && config[key].is_number()) out = config[key].get<double>();
  };
  if (config.contains("blur-length") && config["blur-length"].is_array() &&
      config["blur-length"].size() == 2 && config["blur-length"][0].is_number() &&
      config["blur-length"][1].is_number()) {
    b.min_length = config["blur-length"][0].get<double>();
    b.max_length = config["blur-length"][1].get<double>();
  }
  number("blur-noise", b.max_noise);
  number("straight-blur", b.linear_share);
  return b;
}

EvalLayout DeblurEvaluator::base_layout() {
  EvalLayout l;
  l.columns = {{"psnr", "PSNR (dB)", 2}, {"ssim", "SSIM", 4}};
  l.baseline = "Blurred";
  l.baseline_phrase = "the blurred input";
  l.unit = "dB";
  l.note = "RGB; SSIM on Y";
  l.separator = "; ";
  l.report_sets = {{"synthetic", "Synthetic"}, {"photos", "Photos"}};
  return l;
}

DeblurEvaluator::DeblurEvaluator(std::vector<data::DeblurPair> pairs, c10::Device device,
                                 std::string description, std::string data)
    : pairs_(std::move(pairs)),
      device_(device),
      description_(std::move(description)),
      data_(std::move(data)),
      layout_(base_layout()) {
  // SSIM's 11x11 window must fit in the image cropped to multiples of 4.
  for (const auto& p : pairs_) {
    const auto cropped = crop4(p.blurred);
    if (cropped.size(-2) < 11 || cropped.size(-1) < 11)
      throw InputError("image " + p.name + " is " + std::to_string(p.blurred.size(-1)) + "x" +
                       std::to_string(p.blurred.size(-2)) +
                       "; scoring a restoration needs at least 12x12 pixels");
  }
}

Evaluation DeblurEvaluator::evaluate(const Forward& forward, const std::string& save_dir) const {
  torch::NoGradGuard no_grad;
  Evaluation ev;
  double loss = 0;
  for (const auto& p : pairs_) {
    const auto blurred = crop4(p.blurred), sharp = crop4(p.sharp);
    auto out = to_unit(forward(to_signed(blurred).unsqueeze(0).to(device_)))
                   .squeeze(0)
                   .cpu()
                   .to(at::kFloat);
    loss +=
        torch::mse_loss(out.clamp(0, 1), sharp).item<double>() / static_cast<double>(pairs_.size());
    out = data::quantize_8bit(out);
    ev.items.push_back({p.name,
                        {{"psnr", data::psnr(out, sharp)},
                         {"ssim", data::ssim(data::rgb_to_y(out), data::rgb_to_y(sharp))}},
                        {{"psnr", data::psnr(blurred, sharp)},
                         {"ssim", data::ssim(data::rgb_to_y(blurred), data::rgb_to_y(sharp))}}});
    if (!save_dir.empty()) {
      const fs::path name = fs::path(p.name).stem().string() + "_restored.png";
      const fs::path dir = fs::path(save_dir) / fs::path(p.name).parent_path();
      fs::create_directories(dir);
      data::write_image(dir / name, out);
    }
  }
  ev.count = static_cast<int64_t>(pairs_.size());
  ev.metrics = mean_of_items(ev.items, false);
  ev.metrics.emplace_back("loss", loss);
  ev.baseline = mean_of_items(ev.items, true);
  return ev;
}

void DeblurEvaluator::for_each_input(int64_t batches,
                                     const std::function<void(const at::Tensor&)>& f) const {
  const auto count =
      std::min<size_t>(pairs_.size(), static_cast<size_t>(std::max<int64_t>(0, batches)));
  for (size_t i = 0; i < count; ++i)
    f(to_signed(crop4(pairs_[i].blurred)).unsqueeze(0).to(device_));
}

std::unique_ptr<Evaluator> make_deblur_evaluator(ModelImpl& /*model*/, const EvalData& data,
                                                 const c10::Device& device) {
  data::DeblurDataOptions o;
  o.seed = 0;
  o.patch_size = 64;
  o.max_image_pixels = data.max_image_pixels;
  const auto folder = [&](const char* key) {
    return data.options.contains(key) ? data.options[key].get<std::string>() : std::string();
  };
  o.blur_dir = folder("blur_dir");
  o.sharp_dir = folder("sharp_dir");
  o.blur = blur_of_run(data.run_config);
  auto pairs = data::load_deblur_eval_data(data.data, o);
  if (data.batches > 0 && static_cast<size_t>(data.batches) < pairs.size())
    pairs.resize(static_cast<size_t>(data.batches));
  const std::string source = o.blur_dir.empty() ? data.data : o.blur_dir + " + " + o.sharp_dir;
  const std::string description = std::to_string(pairs.size()) + " evaluation pairs of " + source;
  return std::make_unique<DeblurEvaluator>(std::move(pairs), device, description, source);
}

}  // namespace igb::models::deblur
