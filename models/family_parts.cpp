#include "models/family_parts.h"

#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/cli.h"
#include "data/synthetic_images.h"
#include "models/model_from_checkpoint.h"
#include "models/report_sets.h"

namespace igb::models {

void set_photo_train_defaults(TrainConfig& train, const std::string& model, int64_t epochs,
                              int64_t batch_size, double lr) {
  train.model = model;
  train.data = "photos";
  train.epochs = epochs;
  train.lr_decay = "cosine";
  train.batch_size = batch_size;
  train.lr = lr;
  train.optimizer = "adam";
}

CLI::Option* add_patch_size_option(CLI::App& app, int64_t& patch_size, const std::string& help) {
  return int_range(app.add_option("--patch-size", patch_size, help)->capture_default_str(), 8,
                   4096);
}

void add_self_ensemble_options(CLI::App& app, TestRequest& request, const std::string& mean_of) {
  app.add_flag("--self-ensemble", request.self_ensemble,
               mean_of +
                   " on its eight flips and transposes (8x the cost; not with --quantize-eval or "
                   "--onnx)");
  add_also_eval_option(app, request.also_eval);
}

Checkpoint inherit_resumed_run(TrainConfig& train, const nlohmann::json& model_args,
                               const CLI::App& app) {
  auto ckpt = Checkpoint::load(train.resume);
  check_model_args_match(model_args, ckpt);
  if (!app.get_option("--model")->count()) train.model = ckpt.meta().model;
  train.data = resumed_data(train.data, app.get_option("--data")->count() > 0, ckpt);
  return ckpt;
}

SyntheticInputs synthetic_image_inputs(
    std::function<at::Tensor(const at::Tensor& rgb, int64_t channels)> to_input) {
  return [to_input = std::move(to_input)](const std::vector<int64_t>& in, int64_t batches,
                                          const std::function<void(const at::Tensor&)>& f) {
    for (int64_t b = 0; b < batches; ++b) {
      const auto rgb = data::render_synthetic_image(in[2], in[3], static_cast<uint64_t>(1000 + b));
      f(to_input(rgb, in[1]).unsqueeze(0));
    }
  };
}

at::Tensor grey_channels(const at::Tensor& rgb, int64_t channels) {
  return rgb.mean(0, true).expand({channels, rgb.size(1), rgb.size(2)}).contiguous();
}

}  // namespace igb::models
