#pragma once

#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

#include "compress/filter_pruner_options.h"
#include "compress/pruners.h"

namespace igb::compress {

/// RandomLevelStructureParameterPruner: the keys of L1RankedStructureParameterPruner with
/// `sparsity_range` instead of `desired_sparsity`.
///
///   RandomLevelStructurePrunerOptions o;
///   o.sparsity_range({0.1, 0.5}).structures(RankedStructurePrunerOptions({{"conv1.weight", 0,
///   GroupType::kFilters}}));
struct RandomLevelStructurePrunerOptions {
  static RandomLevelStructurePrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `sparsity_range: [a, b]`: each weight's fraction is drawn uniformly between a and b (both in
  /// [0, 1]) at every call. Required; default [0, 0].
  TORCH_ARG(std::vector<double>, sparsity_range) = std::vector<double>({0.0, 0.0});
  /// `group_type`, `weights`, optional `group_dependency` and `kwargs`, as the L1 ranked pruner
  /// reads them (RankedStructurePrunerOptions::from_yaml_structures; fractions unused).
  TORCH_ARG(RankedStructurePrunerOptions, structures);
};

/// Distiller's RandomLevelStructureParameterPruner: at each call, each weight draws its own
/// fraction uniformly from sparsity_range (from LibTorch's default generator, which the run seeds,
/// so runs and resumed runs are reproducible) and is pruned as the L1 ranked pruner prunes it at
/// that fraction; with Leader, the first weight is ranked at each weight's own fraction. The masks
/// replace the previous ones; a weight whose draw prunes nothing keeps its mask.
class RandomLevelStructurePruner : public Pruner {
 public:
  RandomLevelStructurePruner(std::string name, RandomLevelStructurePrunerOptions options);
  std::vector<std::string> targets() const override;
  std::vector<std::string> filter_targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const RandomLevelStructurePrunerOptions& options() const { return options_; }

 private:
  RandomLevelStructurePrunerOptions options_;
  RankedStructurePruner ranker_;
};

/// Distiller's BernoulliFilterPruner (DropFilter) and BernoulliFilterPruner_AGP (options.agp):
/// each call keeps each filter of each weight with probability 1 − fraction (one draw from
/// LibTorch's default generator per filter; with Leader one draw shared by all weights), and the
/// mask holds 1/(kept/filters) on the kept filters, so the masked layer's output keeps its scale;
/// a fraction of 0 leaves the masks alone. The mask covers the weight alone (not its channel
/// group: the scaling is meant for the weight), and replaces the previous one. Distiller uses it
/// with use_double_copies, mask_on_forward_only and discard_masks_at_minibatch_end: masks that
/// stay applied after the optimizer step would scale the kept filters again at every step. When
/// every filter is dropped the mask is all zeros.
class BernoulliFilterPruner : public Pruner {
 public:
  BernoulliFilterPruner(std::string name, FilterPrunerOptions options);
  std::vector<std::string> targets() const override { return options_.weights(); }
  bool needs_range_timing() const override { return options_.agp(); }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const FilterPrunerOptions& options() const { return options_; }

 private:
  FilterPrunerOptions options_;
};

/// Adds RandomLevelStructureParameterPruner, BernoulliFilterPruner and BernoulliFilterPruner_AGP
/// to the pruner registry.
void register_random_pruners(Registry<PrunerFactory>& registry);

}  // namespace igb::compress
