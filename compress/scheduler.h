#pragma once

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compress/extensions.h"
#include "compress/lr_schedulers.h"
#include "compress/model_params.h"
#include "compress/policy_timing.h"
#include "compress/pruners.h"
#include "compress/quantizer.h"
#include "compress/regularizers.h"
#include "compress/training_hooks.h"
#include "graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb::compress {

/// One entry of the schedule's `policies` list.
struct Policy {
  enum class Kind { kPruner, kRegularizer, kLrScheduler, kExtension, kQuantizer };
  Kind kind = Kind::kPruner;
  std::string instance;
  PolicyTiming timing;
  /// Pruner policy args (Distiller's names and meanings; docs/schedules.md, "When things
  /// happen"). keep_mask is also a regularizer policy arg.
  bool keep_mask = false;
  bool mask_on_forward_only = false;
  bool mask_gradients = false;
  bool use_double_copies = false;
  /// Masks recomputed at every global minibatch index (epoch · batches + batch) divisible by it,
  /// besides the first minibatch of each scheduled epoch; 0: never.
  int64_t mini_batch_pruning_frequency = 0;
  /// Every mask is dropped after the minibatch's optimizer step and masking.
  bool discard_masks_at_minibatch_end = false;
  /// The policy's first masks are computed at the second minibatch of its first epoch.
  bool skip_first_minibatch = false;
  /// Its pruner ranks each Conv2d weight followed by a BatchNorm on the BN-folded weight
  /// (compress/bn_fold_ranking.h), at every mask update; the mask applies to the unfolded one.
  bool fold_batchnorm = false;
  /// file:line of the policy.
  std::string where;
};

/// Distiller's compression scheduler, driven by a schedule in Distiller's YAML format
/// (docs/schedules.md): pruners, regularizers, LR schedulers and extensions acting at the six
/// training hooks by their policies' timing, with one mask per pruned parameter applied before
/// every forward pass and after every optimizer step. Every name in the file is validated when it
/// is loaded; nothing is silently ignored.
///
///   auto sched = CompressionScheduler::from_file("agp.yaml", *model, 0.01, &logger);
///   Trainer trainer(config, ctx, task, *sched, info);
class CompressionScheduler : public TrainingHooks {
 public:
  /// Parses and validates `text` (named `file` in messages) against `model`; `base_lr` is the
  /// learning rate the LR schedulers scale; `narrowing` (--int8-weights) narrows the quantizer's
  /// 8-bit weights. InputError with file:line on any problem.
  static std::unique_ptr<CompressionScheduler> from_text(const std::string& text,
                                                         const std::string& file,
                                                         torch::nn::Module& model, double base_lr,
                                                         Logger* logger,
                                                         const WeightNarrowing& narrowing = {});
  static std::unique_ptr<CompressionScheduler> from_file(const std::string& path,
                                                         torch::nn::Module& model, double base_lr,
                                                         Logger* logger,
                                                         const WeightNarrowing& narrowing = {});

  void on_epoch_begin(int64_t epoch, torch::optim::Optimizer& optimizer) override;
  void on_minibatch_begin(const MinibatchInfo& info, torch::optim::Optimizer& optimizer) override;
  at::Tensor before_backward_pass(const MinibatchInfo& info, const at::Tensor& loss,
                                  torch::optim::Optimizer& optimizer) override;
  void before_parameter_optimization(const MinibatchInfo& info,
                                     torch::optim::Optimizer& optimizer) override;
  void on_minibatch_end(const MinibatchInfo& info, torch::optim::Optimizer& optimizer) override;
  void on_epoch_end(int64_t epoch, const std::map<std::string, double>& metrics,
                    torch::optim::Optimizer& optimizer) override;

  void save_state(torch::serialize::OutputArchive& archive) const override;
  void load_state(torch::serialize::InputArchive& archive) override;
  bool has_state() const override { return true; }
  std::vector<EpochScalar> epoch_scalars() const override;
  bool controls_lr() const override;
  void set_distributed(Distributed& dist) override;
  void set_validation_metric(const std::string& primary, bool higher_is_better) override;
  std::string schedule_text() const override { return text_; }
  nlohmann::json take_thinning_recipes() override;
  nlohmann::json quantization() const override;
  /// PACT's α group, once the quantizer has prepared the model.
  std::vector<ParamGroup> param_groups() const override;

  /// How to trace the model for thinning (FilterRemover, ChannelRemover): its input shape and
  /// forward. Without it a thinning extension is an error when its epoch comes.
  void set_tracer(std::vector<int64_t> input_shape, graph::SummaryGraph::Forward forward);
  /// How thinning extensions round the channel counts they leave (compress/thinning.h,
  /// plan_thinning); by default they do not.
  void set_thinning_width(WidthPolicy width) { thinning_width_ = std::move(width); }

  /// Tells the scheduler the run trains epochs 0 … epochs − 1: warns (naming the policy and its
  /// file:line) of every policy that starts after the last epoch, so it never acts, or acts past
  /// it, so it is cut short (an AGP pruner then stops below its final sparsity).
  void set_epochs(int64_t epochs);

  /// A warning repeated for many items is logged for the first kWarningsShown, then once as
  /// "… and N more".
  static constexpr size_t kWarningsShown = 5;

  /// Multiplies every masked parameter by its mask.
  void apply_masks();
  const MaskTable& masks() const { return masks_; }
  /// The quantizer, or nullptr.
  const Quantizer* quantizer() const { return quantizer_.get(); }
  const std::vector<Policy>& policies() const { return policies_; }
  /// Parameters some pruning or regularization policy names, in first-named order.
  const std::vector<std::string>& named_params() const { return named_params_; }

 private:
  /// Reads a schedule's YAML into the scheduler's instances and policies
  /// (compress/schedule_parser.cpp); the only part of the scheduler that sees YAML.
  class Parser;

  CompressionScheduler(torch::nn::Module& model, double base_lr, Logger* logger);
  /// After the policies: checks the quantizer policy (one, starting at epoch 0) and what it cannot
  /// be combined with (thinning, activation ranking, double copies), then prepares the model, as
  /// Distiller's QuantizationPolicy does when the schedule is loaded.
  void setup_quantizer();
  bool quantizer_prepared() const;
  /// Logs `lines` as warnings, the first kWarningsShown of them and then "… and N more `rest`".
  void warn_summarised(const std::vector<std::string>& lines, const std::string& rest) const;
  /// The section key of a policy kind: "pruner", "regularizer", "lr_scheduler", "extension",
  /// "quantizer".
  static std::string section_kind(Policy::Kind kind);

  void run_extension(Extension& extension, int64_t epoch, torch::optim::Optimizer& optimizer);
  /// Whether some pruning policy is scheduled at `epoch`.
  bool pruning_at(int64_t epoch) const;
  /// Traces the model (when a tracer is set) and hands its channel groups to the pruners.
  void refresh_channel_groups();
  /// Masks of pruning policy `p` for `epoch`: its pruner's, on the BN-folded weights with
  /// fold_batchnorm.
  void set_policy_masks(const Policy& p, int64_t epoch);
  /// Steps the LR policies active at `epoch`, in file order (the last one stepped sets the rate).
  void step_lr_schedulers(int64_t epoch, const std::map<std::string, double>& metrics,
                          torch::optim::Optimizer& optimizer);
  /// The metric a ReduceLROnPlateau policy watches: mode max the primary metric, mode min the
  /// validation loss (Distiller hands it {'min': loss, 'max': top-1}).
  double watched_metric(const Policy& policy, const LrScheduler& scheduler,
                        const std::map<std::string, double>& metrics) const;

  torch::nn::Module& model_;
  ModelParams params_;
  double base_lr_;
  std::vector<int64_t> input_shape_;
  graph::SummaryGraph::Forward forward_;
  WidthPolicy thinning_width_;
  nlohmann::json pending_recipes_ = nlohmann::json::array();
  bool groups_stale_ = true;
  /// Conv2d weight → its BatchNorm, for fold_batchnorm policies (traced when first needed).
  std::optional<std::map<std::string, std::string>> bn_pairs_;
  std::set<std::string> groups_logged_;
  Logger* logger_;
  std::string text_, file_;
  std::map<std::string, std::unique_ptr<Pruner>> pruners_;
  std::map<std::string, std::unique_ptr<Regularizer>> regularizers_;
  std::map<std::string, std::unique_ptr<LrScheduler>> lr_schedulers_;
  std::map<std::string, std::unique_ptr<Extension>> extensions_;
  std::unique_ptr<Quantizer> quantizer_;
  std::vector<Policy> policies_;
  std::vector<std::string> named_params_;
  MaskTable masks_;
  /// The rate the LR policies last set; re-applied at the first epoch after load_state, so a run
  /// resumed without optimizer state continues with it.
  std::optional<double> lr_set_;
  bool reapply_lr_ = false;
  /// LR scheduler instances in the order the file defines them.
  std::vector<std::string> lr_defined_;
  /// The optform's primary validation metric and its direction (set_validation_metric).
  std::string primary_metric_;
  bool higher_is_better_ = true;
  int64_t epoch_ = 0;
  /// Masking modes, shared by every mask as in Distiller (whose pruning policies set them on every
  /// parameter's masker): set by a pruning policy when it first acts, forward_only and
  /// double_copies cleared by its keep_mask at its final epoch, gradient masking ended then.
  struct MaskModes {
    bool forward_only = false;
    bool double_copies = false;
    bool mask_gradients = false;
  };
  MaskModes modes_;
  /// Pruning policies (by index in policies_) that have acted, and those whose first masks wait
  /// for the second minibatch (skip_first_minibatch).
  std::set<size_t> started_, skip_pending_;
  /// Extension policies (by index) that have acted in the current epoch.
  std::set<size_t> extensions_done_;
  std::map<std::string, at::Tensor> dense_copies_;
};

/// Registers pruner, regularizer, LR-scheduler, extension and quantizer classes (idempotent).
void register_builtin_compression();

}  // namespace igb::compress
