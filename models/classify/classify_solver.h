#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "compress/post_train_quantizer.h"
#include "core/run_context.h"
#include "models/external_forward.h"
#include "models/trainer.h"

namespace igb::models::classify {

/// Options of `igb-train --optform=classify`.
struct ClassifyConfig {
  TrainConfig train;
  /// "auto" (recognise --data), "cifar10", "mnist", "imagefolder" or "synthetic".
  std::string dataset = "auto";
  /// Output classes; 0 = as many as the data has.
  int64_t num_classes = 0;
  /// Side of the square input; 0 = the model's default (32 for CIFAR models, 224 for ImageNet
  /// ones).
  int64_t input_size = 0;
  /// Extra model options from --model-arg KEY=VALUE.
  nlohmann::json model_args = nlohmann::json::object();
  /// Images of the synthetic shapes' training and validation splits (--data synthetic only).
  int64_t synthetic_train = 20000;
  int64_t synthetic_val = 2000;
};

/// Top-1 and top-5 accuracy (in %) and mean cross-entropy of `model` over a dataset.
struct ClassifyEvaluation {
  double top1 = 0, top5 = 0, loss = 0;
  int64_t count = 0;
};
/// `forward`, when set, runs instead of model.forward (the post-training quantized model).
ClassifyEvaluation evaluate_classifier(
    ModelImpl& model, const data::Dataset& dataset, int64_t batch_size, int64_t workers,
    const c10::Device& device, const std::function<at::Tensor(const at::Tensor&)>& forward = {});

/// The validation split of `data` (as igb-test reads it) as a repeatable evaluator, for the
/// sensitivity sweep: the first `batches` batches of 128 images (0: all), loaded once into
/// memory and evaluated in the same order at every call: {top1, top5, loss}. `description` (when
/// given) receives what was loaded.
std::function<Metrics()> classify_evaluator(ModelImpl& model, const std::string& data,
                                            const std::string& dataset, int64_t batches,
                                            const c10::Device& device,
                                            std::string* description = nullptr);

/// Trains a classifier as `config` says and returns summary.json's content.
nlohmann::json train_classify(const ClassifyConfig& config, RunContext& ctx, const RunInfo& info);

/// Tests a checkpoint on the validation split of `data`; writes test_summary.json to `out`
/// (default the checkpoint's folder) and returns it. With `quantize_eval` enabled, also evaluates
/// the post-training quantized model (calibrated on the first batches of the same split); with
/// `external` enabled, also that model (an ONNX export in onnxruntime) on the same batches.
nlohmann::json test_classify(const std::string& checkpoint, const std::string& data,
                             const std::string& dataset, const std::string& out, RunContext& ctx,
                             const compress::QuantizeEvalRequest& quantize_eval = {},
                             const ExternalForward& external = {});

}  // namespace igb::models::classify
