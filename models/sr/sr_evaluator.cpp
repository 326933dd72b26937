#include "models/sr/sr_evaluator.h"

#include <filesystem>

#include "core/error.h"
#include "core/tensor_util.h"
#include "data/image.h"
#include "data/image_metrics.h"
#include "models/sr/sr_model.h"

namespace igb::models::sr {

namespace fs = std::filesystem;

EvalLayout SrEvaluator::base_layout() {
  EvalLayout l;
  l.columns = {{"psnr", "PSNR (dB)", 2}, {"ssim", "SSIM", 4}};
  l.baseline = "Bicubic";
  l.baseline_phrase = "bicubic";
  l.unit = "dB";
  l.report_sets = {{"synthetic", "Synthetic"}, {"photos", "Photos"}};
  return l;
}

SrEvaluator::SrEvaluator(std::vector<data::SrEvalImage> images, int64_t scale, bool y_channel,
                         c10::Device device, std::string description, std::string data)
    : images_(std::move(images)),
      scale_(scale),
      y_channel_(y_channel),
      device_(device),
      description_(std::move(description)),
      data_(std::move(data)),
      layout_(base_layout()) {
  // SSIM's 11x11 window must fit in what is left after the border of `scale` pixels is shaved.
  const int64_t least = 11 + 2 * scale_;
  for (const auto& img : images_)
    if (img.hr_rgb.size(1) < least || img.hr_rgb.size(2) < least)
      throw InputError("image " + img.name + " is " + std::to_string(img.hr_rgb.size(2)) + "x" +
                       std::to_string(img.hr_rgb.size(1)) + "; scoring at x" +
                       std::to_string(scale_) + " needs at least " + std::to_string(least) + "x" +
                       std::to_string(least) + " pixels");
  layout_.note = "x" + std::to_string(scale_) + ", " + (y_channel_ ? "Y" : "RGB→Y") + ", border " +
                 std::to_string(scale_);
}

Evaluation SrEvaluator::evaluate(const Forward& forward, const std::string& save_dir) const {
  torch::NoGradGuard no_grad;
  Evaluation ev;
  double loss = 0;
  for (const auto& img : images_) {
    auto out = forward(img.lr.unsqueeze(0).to(device_)).squeeze(0).cpu();
    auto hr_y = data::rgb_to_y(img.hr_rgb);
    at::Tensor sr_y, sr_rgb;
    if (y_channel_) {
      sr_y = data::quantize_8bit(out);
      if (!save_dir.empty()) {
        auto ycc = data::rgb_to_ycbcr(img.bicubic_rgb);
        sr_rgb = data::ycbcr_to_rgb(torch::cat({sr_y, ycc.narrow(0, 1, 2)}, 0));
      }
    } else {
      sr_rgb = data::quantize_8bit(out);
      sr_y = data::rgb_to_y(sr_rgb);
    }
    if (sr_y.sizes() != hr_y.sizes())
      throw InputError("the model's output " + shape_text(sr_y.sizes()) + " does not match the " +
                       shape_text(hr_y.sizes()) + " ground truth of " + img.name);
    const auto target = y_channel_ ? hr_y : img.hr_rgb;
    if (out.sizes() == target.sizes())
      loss += torch::mse_loss(out, target).item<double>() / static_cast<double>(images_.size());
    const auto bic_y = data::rgb_to_y(img.bicubic_rgb);
    Evaluation::Item item{
        img.name,
        {{"psnr", data::psnr(sr_y, hr_y, scale_)}, {"ssim", data::ssim(sr_y, hr_y, scale_)}},
        {{"psnr", data::psnr(bic_y, hr_y, scale_)}, {"ssim", data::ssim(bic_y, hr_y, scale_)}}};
    ev.items.push_back(std::move(item));
    if (!save_dir.empty()) {
      const fs::path name =
          fs::path(img.name).stem().string() + "_x" + std::to_string(scale_) + ".png";
      data::write_image(fs::path(save_dir) / name, sr_rgb);
    }
  }
  ev.count = static_cast<int64_t>(images_.size());
  ev.metrics = mean_of_items(ev.items, false);
  ev.metrics.emplace_back("loss", loss);
  ev.baseline = mean_of_items(ev.items, true);
  return ev;
}

void SrEvaluator::for_each_input(int64_t batches,
                                 const std::function<void(const at::Tensor&)>& f) const {
  const auto count =
      std::min<size_t>(images_.size(), static_cast<size_t>(std::max<int64_t>(0, batches)));
  for (size_t i = 0; i < count; ++i) f(images_[i].lr.unsqueeze(0).to(device_));
}

nlohmann::json SrEvaluator::summary_fields() const {
  return {{"upscale", scale_}, {"data", data_}};
}

std::unique_ptr<Evaluator> make_sr_evaluator(ModelImpl& model, const EvalData& data,
                                             const c10::Device& device) {
  auto* sr_model = dynamic_cast<SrModelImpl*>(&model);
  if (!sr_model) throw InputError("the model is not a super-resolution model");
  const int64_t scale = sr_model->scale();
  const bool y = sr_model->channels() == 1;
  data::SrDataOptions o;
  o.scale = scale;
  o.y_channel = y;
  o.max_image_pixels = data.max_image_pixels;
  auto images = data::load_sr_eval_data(data.data, o);
  if (data.batches > 0 && static_cast<size_t>(data.batches) < images.size())
    images.resize(static_cast<size_t>(data.batches));
  const std::string description = std::to_string(images.size()) + " evaluation images of " +
                                  data.data + " (x" + std::to_string(scale) + ")";
  return std::make_unique<SrEvaluator>(std::move(images), scale, y, device, description, data.data);
}

}  // namespace igb::models::sr
