#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compress/post_train_quantizer.h"
#include "core/run_context.h"
#include "data/sr_data.h"
#include "models/external_forward.h"
#include "models/trainer.h"

namespace igb::models::sr {

/// Options of `igb-train --optform=sr`.
struct SrConfig {
  TrainConfig train;
  /// Upscaling factor: 2, 3 or 4.
  int64_t upscale = 3;
  /// High-resolution training patch side in pixels (a multiple of upscale).
  int64_t patch_size = 96;
  /// "y" (luma, as the published results) or "rgb".
  std::string channels = "y";
  /// Training loss: "mse" or "l1".
  std::string loss = "mse";
  /// Extra model options (e.g. {"d": 32} for fsrcnn), from --model-arg KEY=VALUE.
  nlohmann::json model_args = nlohmann::json::object();
};

/// Options of `igb-test --optform=sr`.
struct SrTestConfig {
  std::string checkpoint;
  std::string data = "synthetic";
  /// Folder for the super-resolved images (PNG); empty = none.
  std::string save_images;
  /// Folder for test_summary.json; empty = the checkpoint's folder.
  std::string out;
  std::string device = "cpu";
  /// --quantize-eval: also evaluate the post-training quantized model.
  compress::QuantizeEvalRequest quantize_eval;
  /// --onnx: also evaluate the exported model in onnxruntime on the same images.
  ExternalForward external;
  /// Super-resolve each image as the mean over its eight flips and transposes (--self-ensemble;
  /// EDSR's "+"); not with quantize_eval or external.
  bool self_ensemble = false;
};

/// Per-image and mean quality of an SR model against bicubic, on Y with a border of `scale`.
struct SrEvaluation {
  struct Row {
    std::string name;
    double psnr, ssim, bicubic_psnr, bicubic_ssim;
  };
  std::vector<Row> rows;
  double psnr = 0, ssim = 0, bicubic_psnr = 0, bicubic_ssim = 0;
  /// Mean over the images of the mean squared error of the model's output (before rounding to 8
  /// bits) against the ground truth, in the model's channels (Y or RGB) on [0, 1].
  double loss = 0;
};

/// Runs `model` on every image; when `save_dir` is set, writes each result as PNG there (luma
/// models get the chroma of the bicubic image). `forward`, when set, runs instead of
/// model.forward (the post-training quantized model).
SrEvaluation evaluate_sr(ModelImpl& model, const std::vector<data::SrEvalImage>& images,
                         int64_t scale, bool y_channel, const c10::Device& device,
                         const std::string& save_dir = {},
                         const std::function<at::Tensor(const at::Tensor&)>& forward = {});

/// The evaluation images of `data` (as igb-test reads them) as a repeatable evaluator, for the
/// sensitivity sweep: the first `images` of them (0: all), loaded once: {psnr, ssim, loss}.
/// `description` (when given) receives what was loaded.
std::function<Metrics()> sr_evaluator(ModelImpl& model, const std::string& data, int64_t images,
                                      const c10::Device& device,
                                      std::string* description = nullptr);

/// Trains an SR model as `config` says and returns summary.json's content.
nlohmann::json train_sr(const SrConfig& config, RunContext& ctx, const RunInfo& info);

/// Tests a checkpoint; prints the per-image table, writes test_summary.json, returns it.
nlohmann::json test_sr(const SrTestConfig& config, RunContext& ctx);

}  // namespace igb::models::sr
