#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/deblur_data.h"
#include "data/motion_blur.h"
#include "models/evaluation.h"

namespace igb::models::deblur {

/// The generator works on [−1, 1]; the data is on [0, 1].
inline at::Tensor to_signed(const at::Tensor& x) { return x * 2 - 1; }
inline at::Tensor to_unit(const at::Tensor& x) { return (x + 1) / 2; }

/// Crops H and W down to multiples of 4 (the generator's two stride-2 stages).
at::Tensor crop4(const at::Tensor& image);

/// The synthetic blur a run trained with, from its resolved options (a checkpoint's config):
/// --blur-length, --blur-noise, --straight-blur; the defaults where absent.
data::MotionBlurOptions blur_of_run(const nlohmann::json& config);

/// Scores deblurring: each pair's blurred image (cropped to multiples of 4, mapped to [−1, 1])
/// through the generator, its result mapped back and rounded to 8 bits, against the sharp image
/// by PSNR on RGB and SSIM on the luma, beside the blurred input itself (the baseline); metrics
/// {psnr, ssim, loss}, the loss being the mean MSE of the unrounded result on [0, 1]. Pairs run
/// one at a time, batch 1.
class DeblurEvaluator : public Evaluator {
 public:
  DeblurEvaluator(std::vector<data::DeblurPair> pairs, c10::Device device, std::string description,
                  std::string data);

  /// The family's metrics and baseline, as every evaluation of it reports them.
  static EvalLayout base_layout();

  std::string description() const override { return description_; }
  /// With `save_dir`, writes each restored image as <folder of the pair>/NAME_restored.png.
  Evaluation evaluate(const Forward& forward, const std::string& save_dir = {}) const override;
  void for_each_input(int64_t batches,
                      const std::function<void(const at::Tensor&)>& f) const override;
  const EvalLayout& layout() const override { return layout_; }
  nlohmann::json summary_fields() const override { return {{"data", data_}}; }

 private:
  std::vector<data::DeblurPair> pairs_;
  c10::Device device_;
  std::string description_, data_;
  EvalLayout layout_;
};

/// The evaluator of a generator on the evaluation pairs of `data` (its first `data.batches` pairs
/// when set): data.options may name two folders of pairs ({"blur_dir", "sharp_dir"}) instead of
/// data.data; synthetic pairs are blurred as data.run_config's run trained (blur_of_run).
std::unique_ptr<Evaluator> make_deblur_evaluator(ModelImpl& model, const EvalData& data,
                                                 const c10::Device& device);

}  // namespace igb::models::deblur
