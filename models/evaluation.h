#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/image.h"
#include "models/eval_layout.h"
#include "models/model.h"

namespace igb::models {

/// Validation and test metrics in display order.
using Metrics = std::vector<std::pair<std::string, double>>;

/// The forward pass an evaluator scores, on the model's input: the model's own, or a form of it
/// (post-training quantized, an ONNX export in onnxruntime, a geometric self-ensemble).
using Forward = std::function<at::Tensor(const at::Tensor&)>;

/// The data an evaluator is built on.
struct EvalData {
  /// The `--data` value: "synthetic" (the family's generator) or a folder.
  std::string data = "synthetic";
  /// Evaluate only the first `batches` batches (images, for families that score images one by
  /// one); 0: all.
  int64_t batches = 0;
  /// The family's own data options ({"dataset": "cifar10"}, {"blur_dir": ..., "sharp_dir": ...}).
  nlohmann::json options = nlohmann::json::object();
  /// The largest image read, in pixels (--max-image-pixels).
  int64_t max_image_pixels = data::kDefaultMaxImagePixels;
  /// The resolved options of the run that trained the model (a checkpoint's config), for data
  /// made the way that run made it (a deblurring run's blur); null when unknown.
  nlohmann::json run_config;
};

/// What one evaluation measured.
struct Evaluation {
  /// The model's metrics, the primary one first ({psnr, ssim, loss}; {top1, top5, loss}).
  Metrics metrics;
  /// The same metrics of the family's baseline on the same data (bicubic upscaling, the blurred
  /// input); empty when the family has none.
  Metrics baseline;
  /// One result per image, for families that score images one by one; empty otherwise.
  struct Item {
    std::string name;
    Metrics metrics, baseline;
  };
  std::vector<Item> items;
  /// Images or samples evaluated.
  int64_t count = 0;
};

/// One application family's evaluation of a model on a fixed set of data, loaded once: every
/// call scores the same items in the same order, so it serves validation, igb-test, the
/// sensitivity sweep, post-training quantization (calibration and scoring), ONNX checks and the
/// bench alike.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  /// What was loaded ("5 evaluation images of synthetic (x3)").
  virtual std::string description() const = 0;
  /// Scores `forward` on every item. With `save_dir`, families that restore images write them
  /// there as PNG.
  virtual Evaluation evaluate(const Forward& forward, const std::string& save_dir = {}) const = 0;
  /// Calls `f` on the model inputs of the first `batches` batches, as evaluate() feeds them
  /// (the calibration data of post-training quantization).
  virtual void for_each_input(int64_t batches,
                              const std::function<void(const at::Tensor&)>& f) const = 0;
  virtual const EvalLayout& layout() const = 0;
  /// The keys test_summary.json holds for this family's data ({"upscale": 3, "data": ...}).
  virtual nlohmann::json summary_fields() const { return nlohmann::json::object(); }
};

/// Builds a family's evaluator of `model` on `data`.
using EvaluatorFactory = std::function<std::unique_ptr<Evaluator>(
    ModelImpl& model, const EvalData& data, const c10::Device& device)>;

/// The mean over `items` of each of their metrics (or of their baselines'), in the first item's
/// order; empty for no items.
Metrics mean_of_items(const std::vector<Evaluation::Item>& items, bool baseline);

/// Scores `model` itself with `evaluator`: in eval mode and without gradients, its train mode
/// restored afterwards.
Evaluation evaluate_model(const Evaluator& evaluator, ModelImpl& model,
                          const std::string& save_dir = {});

/// The metrics of `ev` as a training run validates them: the model's, then the baseline's under
/// the layout's key prefix ("bicubic_psnr"), leaving out those named in `skip`.
Metrics validation_metrics(const Evaluation& ev, const EvalLayout& layout,
                           const std::vector<std::string>& skip = {});

}  // namespace igb::models
