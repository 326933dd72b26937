#pragma once

#include <torch/optim/optimizer.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "compress/training_hooks.h"
#include "core/checkpoint.h"
#include "core/run_context.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "models/evaluation.h"
#include "models/loss_scaler.h"
#include "models/model.h"
#include "models/train_config.h"

namespace igb {
class CsvAppender;
class Distributed;
class EventWriter;
class FolderLock;
}  // namespace igb

namespace igb::models {

/// What one application family brings to the shared training loop.
class TrainingTask {
 public:
  virtual ~TrainingTask() = default;
  virtual Model model() = 0;
  virtual const data::Dataset& train_set() const = 0;
  /// The training forward pass of `model` on `input` (run under autocast with --amp); loss()
  /// follows it. A task whose loss reads more than the output (the exits of an early-exit
  /// network) keeps what it needs here. Default: model.forward(input).
  virtual at::Tensor forward(ModelImpl& model, const at::Tensor& input) {
    return model.forward(input);
  }
  virtual at::Tensor loss(const at::Tensor& output, const at::Tensor& target) = 0;
  /// Runs validation; the primary metric comes first.
  virtual Metrics validate() = 0;
  /// Name of the metric that picks best.ckpt ("psnr", "top1").
  virtual std::string primary_metric() const = 0;
  virtual bool higher_is_better() const { return true; }
  /// The metric that breaks ties of the primary one ("ssim", "top5"); "" for none.
  virtual std::string secondary_metric() const { return ""; }
  /// One log line for an epoch's metrics.
  virtual std::string describe(const Metrics& metrics) const = 0;
  /// Family-specific keys of summary.json, given the last and the best metrics.
  virtual nlohmann::json summary(const Metrics& last, const Metrics& best) const = 0;

  /// Called in each training step after the model's forward pass and before loss(): a GAN
  /// trains its critic here on the detached output. Default: nothing.
  virtual void after_forward(const compress::MinibatchInfo& info, const at::Tensor& input,
                             const at::Tensor& output, const at::Tensor& target) {}
  /// Scalars of the epoch just trained for metrics.csv and TensorBoard (a GAN's critic loss),
  /// called once after each training epoch. Default: none.
  virtual Metrics train_scalars() { return {}; }
  /// The task's own state in checkpoints (a critic and its optimizer). Default: none.
  virtual bool has_state() const { return false; }
  virtual void save_state(torch::serialize::OutputArchive& archive) const {}
  virtual void load_state(torch::serialize::InputArchive& archive) {}
  /// Called once before the first epoch of a data-parallel run: a task that trains more than the
  /// model (a GAN's critic) broadcasts those weights from rank 0 and averages their gradients
  /// over the ranks before each of its steps. Default: nothing.
  virtual void set_distributed(Distributed& dist) {}
};

/// Everything a training run writes about itself besides tensors.
struct RunInfo {
  std::string optform;
  /// Resolved options, written as config.yaml and kept in the checkpoint.
  std::string config_yaml;
  nlohmann::json config_json = nlohmann::json::object();
};

/// Builds the optimizer `config` names over `params` (InputError for an unknown one). Each of
/// `extra` (a schedule's own groups: PACT's α) becomes a parameter group after the main one, with
/// the same options except its weight decay when set; its parameters are left out of the main
/// group (Distiller's PACTQuantizer._get_new_optimizer_params_groups).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const TrainConfig& config, const std::vector<torch::Tensor>& params,
    const std::vector<compress::ParamGroup>& extra = {});

/// The training loop shared by all solvers: calls the hooks in the documented order, validates
/// each epoch, writes metrics.csv, TensorBoard events, checkpoint.ckpt, best.ckpt and
/// summary.json into the run directory, and resumes from a checkpoint.
class Trainer {
 public:
  Trainer(const TrainConfig& config, RunContext& ctx, TrainingTask& task,
          compress::TrainingHooks& hooks, RunInfo info);

  /// Loads model, optimizer and schedule state from `ckpt` and continues after its epoch.
  void resume_from(const Checkpoint& ckpt);

  /// A line for the log once the run directory exists (inputs are validated before anything is
  /// printed or written).
  void note(std::string line) { notes_.push_back(std::move(line)); }

  /// Trains up to config.epochs; returns the summary written to summary.json. The first batch is
  /// loaded and run through the model before anything is created or changed in the run directory.
  nlohmann::json run();

  /// One training step on `batch`, as run() takes it: the schedule's hooks, the forward pass
  /// (under autocast with --amp), the loss in float32, backward (scaled when a loss scaler is on)
  /// and the optimizer step. Returns the loss; std::runtime_error when it is not finite. Public
  /// for bench/amp_speed.cpp, which times it with and without --amp.
  double train_minibatch(const compress::MinibatchInfo& info, const data::Example& batch);

  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  /// The loss scaler of float16 training (--amp on CUDA); null when the loss is not scaled.
  const LossScaler* loss_scaler() const { return scaler_.get(); }

 private:
  /// What one epoch produced, passed from step to step of run().
  struct EpochRecord {
    int64_t epoch = 0;
    double train_loss = 0, lr = 0, seconds = 0;
    Metrics metrics;
    bool improved = false;
    std::vector<compress::EpochScalar> scalars;
  };

  // The steps of run(), in order.
  void check_first_batch();
  /// The buffers a data-parallel job keeps equal across ranks (rank 0's win).
  std::vector<at::Tensor> model_buffers() const;
  void open_run_directory(const std::filesystem::path& out);
  void log_run_start(const std::filesystem::path& out);
  EpochRecord train_and_validate(int64_t epoch);
  double train_epoch(int64_t epoch);
  Metrics validate();
  void end_epoch(EpochRecord& record);
  bool update_best(const EpochRecord& record);
  void log_epoch(const EpochRecord& record);
  void write_metrics(const EpochRecord& record, const std::filesystem::path& out,
                     std::unique_ptr<CsvAppender>& csv, EventWriter& events);
  void write_checkpoints(const EpochRecord& record, const std::filesystem::path& out);
  nlohmann::json write_summary(const EpochRecord& record, const std::filesystem::path& out);

  data::LoaderOptions loader_options() const;
  /// Batches per epoch of `loader`; InputError when the data holds less than one batch.
  int64_t batches_of(const data::BatchLoader& loader) const;

  /// The checkpoint of epoch `record`, which holds its metrics row for complete_metrics_row.
  void save(const std::filesystem::path& path, const EpochRecord& record);
  /// On resume into the checkpoint's own folder: a run stopped after an epoch's checkpoint and
  /// before its metrics.csv row gets that row now, from the checkpoint (and, when that epoch was
  /// the best, its copy as best.ckpt).
  void complete_metrics_row(const std::filesystem::path& out, std::unique_ptr<CsvAppender>& csv,
                            EventWriter& events);
  nlohmann::json make_summary(const Metrics& last) const;

  TrainConfig config_;
  RunContext& ctx_;
  TrainingTask& task_;
  compress::TrainingHooks& hooks_;
  RunInfo info_;
  Model model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  /// The run directory's lock, held while this process writes there.
  std::shared_ptr<FolderLock> run_dir_lock_;
  /// Conv weights and 4-D inputs in channels-last memory (--amp on CPU).
  bool channels_last_ = false;
  int64_t start_epoch_ = 0;
  int64_t best_epoch_ = -1;
  double best_value_ = 0;
  /// Non-zero conv and linear weights of the best epoch; -1 when unknown (older checkpoints).
  int64_t best_nonzero_ = -1;
  Metrics best_metrics_;
  double train_seconds_ = 0;
  std::string resumed_from_;
  /// The resumed checkpoint's epoch, metrics and metrics row (null when it has none).
  int64_t resumed_epoch_ = -1;
  nlohmann::json resumed_metrics_, resumed_row_;
  /// Thinning recipes of the model, from the checkpoint resumed and this run's thinning.
  nlohmann::json recipes_ = nlohmann::json::array();
  /// Validation metrics of the previous epoch (recorded with a thinning).
  Metrics previous_metrics_;
  std::vector<std::string> notes_;
};

/// The learning rate of `epoch` under config.lr_warmup, then config.lr_decay.
double decayed_lr(const TrainConfig& config, int64_t epoch);

/// Loads a checkpoint and checks it was trained with `optform` (InputError otherwise).
Checkpoint load_checkpoint_for(const std::string& path, const std::string& optform);

/// The compression schedule of a run: --compress FILE, else the schedule saved in the checkpoint
/// being resumed, else the empty schedule. Validated against `model` (InputError).
std::unique_ptr<compress::TrainingHooks> make_schedule(const TrainConfig& config, ModelImpl& model,
                                                       Logger* logger, const Checkpoint* resume);

/// Looks up `name` in `metrics` (NaN when absent).
double metric(const Metrics& metrics, const std::string& name);

/// Non-zero entries of the model's conv and linear weights (its 2-D and 4-D parameters), what the
/// best epoch is ranked by first (Distiller's SparsityAccuracyTracker). A weight trained through a
/// float master copy (a quantizer's `float_weight` buffer) counts the master: zeros that rounding
/// onto a quantization grid makes come and go from step to step and are not sparsity.
int64_t nonzero_weights(const torch::nn::Module& model);

}  // namespace igb::models
