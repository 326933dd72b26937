#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sr_data.h"
#include "models/evaluation.h"

namespace igb::models::sr {

/// Scores super-resolution: each image's output, rounded to 8 bits, against the ground truth by
/// PSNR and SSIM on the luma with a border of `scale` pixels cropped, beside bicubic upscaling of
/// the same input (the baseline); metrics {psnr, ssim, loss}, where the loss is the mean over the
/// images of the MSE of the unrounded output in the model's channels (Y or RGB, on [0, 1]).
/// Images run one at a time, batch 1.
class SrEvaluator : public Evaluator {
 public:
  SrEvaluator(std::vector<data::SrEvalImage> images, int64_t scale, bool y_channel,
              c10::Device device, std::string description, std::string data = "synthetic");

  /// The family's metrics and baseline, as every evaluation of it reports them.
  static EvalLayout base_layout();

  std::string description() const override { return description_; }
  /// With `save_dir`, writes each result as NAME_xS.png (a luma model's result gets the chroma of
  /// the bicubic image).
  Evaluation evaluate(const Forward& forward, const std::string& save_dir = {}) const override;
  void for_each_input(int64_t batches,
                      const std::function<void(const at::Tensor&)>& f) const override;
  const EvalLayout& layout() const override { return layout_; }
  nlohmann::json summary_fields() const override;

 private:
  std::vector<data::SrEvalImage> images_;
  int64_t scale_;
  bool y_channel_;
  c10::Device device_;
  std::string description_, data_;
  EvalLayout layout_;
};

/// The evaluator of an SR model on the evaluation images of `data` (its first `data.batches`
/// images when set), degraded at the model's scale; InputError when `model` is not an SR model.
std::unique_ptr<Evaluator> make_sr_evaluator(ModelImpl& model, const EvalData& data,
                                             const c10::Device& device);

}  // namespace igb::models::sr
