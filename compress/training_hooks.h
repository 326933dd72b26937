#pragma once

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace igb {
class Distributed;
}  // namespace igb

namespace igb::compress {

/// Where the training loop is when it calls a hook.
struct MinibatchInfo {
  /// 0-based epoch.
  int64_t epoch = 0;
  /// 0-based minibatch within the epoch.
  int64_t batch = 0;
  /// Minibatches in this epoch.
  int64_t batches_per_epoch = 0;
};

/// A scalar a schedule reports once per epoch: a metrics.csv column and a TensorBoard tag.
struct EpochScalar {
  std::string column;
  std::string tag;
  double value = 0;
};

/// Parameters a schedule adds to the model that the optimizer steps in a group of their own (a
/// PACT quantizer's clipping values α): the same options as the other parameters except the weight
/// decay, when set.
struct ParamGroup {
  std::vector<at::Tensor> params;
  std::optional<double> weight_decay;
};

/// The six points at which a compression schedule acts on training, called by every solver in this
/// order per epoch:
///   on_epoch_begin → for each minibatch { on_minibatch_begin → forward → loss →
///   before_backward_pass → backward → before_parameter_optimization → optimizer.step() →
///   on_minibatch_end } → validate → on_epoch_end.
/// The base class is the empty schedule: every hook does nothing.
class TrainingHooks {
 public:
  virtual ~TrainingHooks() = default;

  virtual void on_epoch_begin(int64_t epoch, torch::optim::Optimizer& optimizer) {}
  /// Called once before the first epoch of a data-parallel run: what the hooks compute from
  /// each rank's own data (activation statistics) is then reduced over the ranks.
  virtual void set_distributed(Distributed& dist) {}
  virtual void on_minibatch_begin(const MinibatchInfo& info, torch::optim::Optimizer& optimizer) {}
  /// Returns the loss to back-propagate (regularization terms added).
  virtual at::Tensor before_backward_pass(const MinibatchInfo& info, const at::Tensor& loss,
                                          torch::optim::Optimizer& optimizer) {
    return loss;
  }
  virtual void before_parameter_optimization(const MinibatchInfo& info,
                                             torch::optim::Optimizer& optimizer) {}
  virtual void on_minibatch_end(const MinibatchInfo& info, torch::optim::Optimizer& optimizer) {}
  virtual void on_epoch_end(int64_t epoch, const std::map<std::string, double>& metrics,
                            torch::optim::Optimizer& optimizer) {}

  /// Whole schedule state, for the checkpoint.
  virtual void save_state(torch::serialize::OutputArchive& archive) const {}
  virtual void load_state(torch::serialize::InputArchive& archive) {}
  /// Whether there is anything to save (false for the empty schedule).
  virtual bool has_state() const { return false; }

  /// Parameter groups of their own for the optimizer, built after the schedule (the solver leaves
  /// these parameters out of its main group).
  virtual std::vector<ParamGroup> param_groups() const { return {}; }

  /// Scalars to log after each epoch (sparsity of the pruned weights, ...).
  virtual std::vector<EpochScalar> epoch_scalars() const { return {}; }
  /// Whether the schedule sets the learning rate (its lr_schedulers replace --lr-decay).
  virtual bool controls_lr() const { return false; }
  /// Names the optform's primary validation metric (a key of on_epoch_end's metrics) and its
  /// direction, for schedulers that watch it (ReduceLROnPlateau). Called before the first epoch.
  virtual void set_validation_metric(const std::string& primary, bool higher_is_better) {}
  /// The schedule's text, copied into the run directory and the checkpoint.
  virtual std::string schedule_text() const { return {}; }
  /// The quantizer that prepared the model, as CheckpointMeta::quantization records it ({"class",
  /// "bits": {module: {bits_…}}, the hyperparams}); null when none.
  virtual nlohmann::json quantization() const { return nullptr; }
  /// Thinning recipes applied to the model since the last call (core/thinning_recipe.h), in
  /// order; the solver appends them to the checkpoint's recipes.
  virtual nlohmann::json take_thinning_recipes() { return nlohmann::json::array(); }
};

}  // namespace igb::compress
