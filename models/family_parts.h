#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "models/evaluate_checkpoint.h"
#include "models/family.h"
#include "models/train_config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace igb::models {

// Parts the families' descriptors (models/<family>/<family>_family.cpp) share.

/// The training defaults of a family that restores photographs (sr, deblur): `model` on the
/// photographs (data "photos"), `epochs` epochs of batches of `batch_size`, Adam at `lr` with
/// cosine decay.
void set_photo_train_defaults(TrainConfig& train, const std::string& model, int64_t epochs,
                              int64_t batch_size, double lr);

/// Adds --patch-size, the side in pixels (8 to 4096) of a training crop, bound to `patch_size`.
CLI::Option* add_patch_size_option(CLI::App& app, int64_t& patch_size, const std::string& help);

/// Adds igb-test's --self-ensemble and --also-eval, bound to `request`. `mean_of` says what the
/// ensemble does ("Restore each image as the mean of the generator's outputs"); the help goes on
/// with " on its eight flips and transposes (…)".
void add_self_ensemble_options(CLI::App& app, TestRequest& request, const std::string& mean_of);

/// A resumed run (`train.resume`): loads the checkpoint, refuses `model_args` that differ from
/// it, and takes its model and dataset unless --model and --data were given in `app`. Returns
/// the checkpoint, for what else the family takes from it.
Checkpoint inherit_resumed_run(TrainConfig& train, const nlohmann::json& model_args,
                               const CLI::App& app);

/// SyntheticInputs of one synthetic image a batch (data::render_synthetic_image, seeds 1000,
/// 1001, …) at the input's height and width, each mapped by `to_input` from RGB [3, H, W] on
/// [0, 1] to the model's [C, H, W] (C = `channels`, the input's).
SyntheticInputs synthetic_image_inputs(
    std::function<at::Tensor(const at::Tensor& rgb, int64_t channels)> to_input);

/// `rgb` [3, H, W] as `channels` copies of its mean over the channels.
at::Tensor grey_channels(const at::Tensor& rgb, int64_t channels);

}  // namespace igb::models
