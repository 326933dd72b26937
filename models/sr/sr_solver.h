#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/run_context.h"
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

/// Trains an SR model as `config` says and returns summary.json's content.
nlohmann::json train_sr(const SrConfig& config, RunContext& ctx, const RunInfo& info);

}  // namespace igb::models::sr
