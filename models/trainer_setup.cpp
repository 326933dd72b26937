// What a training run is made of before its first step: the optimizer with a schedule's
// parameter groups, the learning rate of an epoch, the checkpoint a run resumes and the schedule
// it trains under. The training loop itself is trainer.cpp.
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <set>

#include "compress/scheduler.h"
#include "core/error.h"
#include "models/trainer.h"

namespace igb::models {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const TrainConfig& config, const std::vector<torch::Tensor>& params,
    const std::vector<compress::ParamGroup>& extra) {
  std::unique_ptr<torch::optim::OptimizerOptions> defaults;
  if (config.optimizer == "sgd")
    defaults = std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(config.lr)
                                                              .momentum(config.momentum)
                                                              .weight_decay(config.weight_decay));
  else if (config.optimizer == "adam")
    defaults = std::make_unique<torch::optim::AdamOptions>(
        torch::optim::AdamOptions(config.lr).weight_decay(config.weight_decay));
  else
    throw InputError("unknown optimizer '" + config.optimizer + "'; valid optimizers: adam, sgd");
  std::set<const c10::TensorImpl*> in_extra;
  for (const auto& g : extra)
    for (const auto& p : g.params) in_extra.insert(p.unsafeGetTensorImpl());
  std::vector<torch::Tensor> base;
  for (const auto& p : params)
    if (!in_extra.count(p.unsafeGetTensorImpl())) base.push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(base, defaults->clone());
  for (const auto& g : extra) {
    auto options = defaults->clone();
    if (g.weight_decay) {
      if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(options.get()))
        sgd->weight_decay(*g.weight_decay);
      else
        static_cast<torch::optim::AdamOptions&>(*options).weight_decay(*g.weight_decay);
    }
    groups.emplace_back(g.params, std::move(options));
  }
  if (config.optimizer == "sgd")
    return std::make_unique<torch::optim::SGD>(groups,
                                               static_cast<torch::optim::SGDOptions&>(*defaults));
  return std::make_unique<torch::optim::Adam>(groups,
                                              static_cast<torch::optim::AdamOptions&>(*defaults));
}

double decayed_lr(const TrainConfig& config, int64_t epoch) {
  if (epoch < config.lr_warmup)
    return config.lr * static_cast<double>(epoch + 1) / static_cast<double>(config.lr_warmup);
  if (config.lr_decay != "cosine" || config.epochs <= 1) return config.lr;
  const double lo = config.lr / 100,
               t = static_cast<double>(epoch) / static_cast<double>(config.epochs - 1);
  return lo + 0.5 * (config.lr - lo) * (1 + std::cos(M_PI * t));
}

Checkpoint load_checkpoint_for(const std::string& path, const std::string& optform) {
  Checkpoint ckpt = Checkpoint::load(path);
  if (ckpt.meta().optform != optform)
    throw InputError("checkpoint " + path + " was trained with --optform=" + ckpt.meta().optform +
                     ", not " + optform);
  // A checkpoint whose optform was changed by hand would reach the other family's solver with a
  // model it cannot score.
  const auto& registry = model_registry();
  const std::string& model = ckpt.meta().model;
  if (registry.contains(model) && registry.get(model).family != optform)
    throw InputError("checkpoint " + path + " says --optform=" + optform + " but holds " + model +
                     ", a " + registry.get(model).family + " model: it is damaged or was edited");
  return ckpt;
}

std::unique_ptr<compress::TrainingHooks> make_schedule(const TrainConfig& config, ModelImpl& model,
                                                       Logger* logger, const Checkpoint* resume) {
  std::unique_ptr<compress::CompressionScheduler> schedule;
  const compress::WeightNarrowing narrowing{config.int8_weight_bits,
                                            config.int8_weights_unsigned_only};
  if (!config.compress.empty())
    schedule = compress::CompressionScheduler::from_file(config.compress, model, config.lr, logger,
                                                         narrowing);
  else if (resume && !resume->meta().schedule_text.empty())
    schedule = compress::CompressionScheduler::from_text(
        resume->meta().schedule_text, resume->path().string() + " (its schedule)", model, config.lr,
        logger, narrowing);
  if (!schedule) return std::make_unique<compress::TrainingHooks>();
  // Thinning traces the model on its own input shape, on the device it trains on.
  schedule->set_tracer(model.input_shape(),
                       [&model](const torch::Tensor& x) { return model.forward(x); });
  schedule->set_epochs(config.epochs);
  return schedule;
}

}  // namespace igb::models
