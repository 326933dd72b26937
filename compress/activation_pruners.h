#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compress/filter_pruner_options.h"
#include "compress/pruners.h"
#include "core/activation.h"

namespace igb::compress {

/// Per-channel statistics of an activation's output over the training batches, as Distiller's
/// SummaryActivationStatsCollector gathers them with a forward hook: installed in an Activation's
/// replacement slot, it runs the original function and, on each forward in training mode (not
/// while tracing), adds one value per channel of the 4-D output: the APoZ, 100 − 100·(mean over
/// the batch of the fraction of non-zero values of the channel's feature map), and the mean
/// (mean over the batch of the feature map's mean). The first training forward after a forward in
/// eval mode (the validation that ends each epoch) starts the sums afresh, as Distiller resets its
/// collectors when an epoch's training begins; so between epochs they hold the last epoch's
/// training batches, and during an epoch its batches so far. A change of channel count (thinning)
/// also starts them afresh.
///
///   auto stats = ActivationStatistics::attach(relu);  // relu: an igb::Activation
///   ... training forwards ...
///   stats->apoz();  // one value per channel, averaged over the batches
class ActivationStatisticsImpl : public torch::nn::Module {
 public:
  explicit ActivationStatisticsImpl(ActivationImpl* observed) : observed_(observed) {}
  torch::Tensor forward(const torch::Tensor& x);

  /// The statistics module in `activation`'s replacement slot, installed there first when the
  /// slot is empty; nullptr when it holds another replacement.
  static std::shared_ptr<ActivationStatisticsImpl> attach(ActivationImpl& activation);

  /// Batches averaged so far (0: no statistics yet).
  int64_t batches() const { return batches_; }
  /// Mean over the batches of each channel's APoZ, in percent.
  at::Tensor apoz() const;
  /// Mean over the batches of each channel's mean activation.
  at::Tensor mean() const;
  /// Dimensions of the last output seen that was not 4-D (0 when all were).
  int64_t unsupported_dim() const { return unsupported_dim_; }

 private:
  ActivationImpl* observed_;
  at::Tensor apoz_sum_, mean_sum_;
  int64_t batches_ = 0;
  int64_t unsupported_dim_ = 0;
  bool restart_ = true;
};

TORCH_MODULE(ActivationStatistics);

/// Which statistic ranks the filters.
enum class ActivationCriterion {
  /// Average percentage of zeros: the filters with the highest APoZ go.
  kApoz,
  /// Mean activation: the filters with the lowest mean go.
  kMean,
};

/// Distiller's ActivationAPoZRankedFilterPruner and ActivationMeanRankedFilterPruner (and their
/// `_AGP` classes, options.agp): ranks the filters of each conv weight by the statistics of the
/// activation Distiller reads for it, the module named as the weight with ".conv" replaced by
/// ".relu" and ".weight" dropped (`layer1.0.conv1.weight` → `layer1.0.relu1`), a ReLU, ReLU6 or
/// LeakyReLU Activation whose channels are the weight's filters. With k = floor(fraction·N)
/// (N − 1 rather than all N unless the fraction is 1), exactly k filters go (ties broken toward
/// the higher filter index), each with its channel group, as the L1 ranked pruner prunes filters;
/// k = 0 leaves the masks alone, and the masks replace the previous ones. With Leader the first
/// weight's choice is applied to all. Statistics are collected from the moment the pruner is
/// built; a call before any training batch has run is an InputError, as it is a failure in
/// Distiller.
class ActivationRankedFilterPruner : public Pruner {
 public:
  /// `statistics`: one per weight, in options.weights() order (attach_statistics()).
  ActivationRankedFilterPruner(std::string name, FilterPrunerOptions options,
                               ActivationCriterion criterion,
                               std::vector<std::shared_ptr<ActivationStatisticsImpl>> statistics,
                               std::vector<std::string> activation_names);
  std::vector<std::string> targets() const override { return options_.weights(); }
  std::vector<std::string> filter_targets() const override { return options_.weights(); }
  bool needs_range_timing() const override { return options_.agp(); }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const FilterPrunerOptions& options() const { return options_; }

  /// The module Distiller reads the activations of `weight` from: ".conv" → ".relu" everywhere
  /// in the name, without the trailing ".weight"; a name starting with "conv" counts as ".conv"
  /// (Distiller's names start with DataParallel's "module.", ours do not).
  static std::string activation_name(const std::string& weight);

  /// In a data-parallel job: turns this rank's statistics into the job's (their mean over the
  /// ranks), called on every rank before filters are ranked, so all ranks prune the same ones.
  void set_reducer(std::function<at::Tensor(const at::Tensor&)> reduce) {
    reduce_ = std::move(reduce);
  }

 private:
  FilterPrunerOptions options_;
  ActivationCriterion criterion_;
  std::function<at::Tensor(const at::Tensor&)> reduce_;
  std::vector<std::shared_ptr<ActivationStatisticsImpl>> statistics_;
  std::vector<std::string> activation_names_;
};

/// Adds ActivationAPoZRankedFilterPruner, ActivationMeanRankedFilterPruner and their `_AGP`
/// classes to the pruner registry.
void register_activation_pruners(Registry<PrunerFactory>& registry);

}  // namespace igb::compress
