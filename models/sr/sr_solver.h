#pragma once

#include <string>
#include <vector>

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
  /// Random crops a training patch is chosen from by detail (--patch-candidates); 0: 3 for
  /// photographs (--data photos or a folder), 1 for generated images, every patch of which is
  /// busy.
  int64_t patch_candidates = 0;
  /// Training loss: "mse" or "l1".
  std::string loss = "mse";
  /// Report sets scored besides --data (--also-eval); empty: the installed ones.
  std::vector<std::string> also_eval;
  /// Extra model options (e.g. {"d": 32} for fsrcnn), from --model-arg KEY=VALUE.
  nlohmann::json model_args = nlohmann::json::object();
};

/// Trains an SR model as `config` says and returns summary.json's content.
nlohmann::json train_sr(const SrConfig& config, RunContext& ctx, const RunInfo& info);

}  // namespace igb::models::sr
