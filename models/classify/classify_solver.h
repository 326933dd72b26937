#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_context.h"
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
  /// Distiller's --earlyexit_lossweights: one weight per early exit of a *_earlyexit model (the
  /// final exit gets 1 - their sum).
  std::vector<double> earlyexit_lossweights;
  /// Distiller's --earlyexit_thresholds: per early exit, the cross-entropy against the label
  /// below which validation counts a sample as leaving there (docs/early-exit.md).
  std::vector<double> earlyexit_thresholds;
};

/// Trains a classifier as `config` says and returns summary.json's content.
nlohmann::json train_classify(const ClassifyConfig& config, RunContext& ctx, const RunInfo& info);

}  // namespace igb::models::classify
