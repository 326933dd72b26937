#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/masks.h"
#include "compress/model_params.h"
#include "compress/policy_timing.h"
#include "core/registry.h"

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// Masks by parameter name (1 keep, 0 pruned), owned by the scheduler.
using MaskTable = std::map<std::string, at::Tensor>;

/// A value per parameter (resolved names), as the element-wise pruners take them.
using ParamValues = std::map<std::string, double>;

/// AGP's target sparsity at `epoch` of a policy (Zhu and Gupta 2017, as Distiller's
/// AutomatedGradualPrunerBase computes it; docs/schedules.md): with span = ((end − start − 1) //
/// freq) · freq, final + (initial − final)·(1 − (epoch − start)/span)³; the last scheduled epoch
/// reaches `final` exactly.
double agp_target(double initial, double final_sparsity, int64_t epoch, const PolicyTiming& timing);

/// A pruner sets masks for the parameters it names; the scheduler applies them.
class Pruner {
 public:
  explicit Pruner(std::string name) : name_(std::move(name)) {}
  virtual ~Pruner() = default;
  const std::string& name() const { return name_; }
  /// The parameters it prunes (resolved names).
  virtual std::vector<std::string> targets() const = 0;
  /// Recomputes the masks of its parameters for `epoch` of a policy with `timing`.
  virtual void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                         const PolicyTiming& timing) = 0;
  /// Whether the policy's timing must be a range (AGP needs start, end and frequency).
  virtual bool needs_range_timing() const { return false; }
  /// Targets whose whole filters it removes (their channel groups go with them).
  virtual std::vector<std::string> filter_targets() const { return {}; }
  /// The resolved configuration as a schedule mapping: {"class": …, key: value, …}, with
  /// parameter names resolved and '*' expanded; loading it back gives the same pruner.
  virtual nlohmann::json hyperparams() const = 0;

 private:
  std::string name_;
};

// ---------------------------------------------------------------------------------------------
// Options. Each `from_yaml` reads one schedule mapping (the caller has already accepted `class`),
// resolves parameter names against the model, checks values with errors naming file:line, and
// refuses unknown keys (`YamlReader::finish`). `to_json` writes the same keys back.

/// SparsityLevelParameterPruner.
///
///   LevelPruner p("p", LevelPrunerOptions({{"conv1.weight", 0.5}}));
struct LevelPrunerOptions {
  LevelPrunerOptions() = default;
  explicit LevelPrunerOptions(ParamValues levels) : levels_(std::move(levels)) {}
  static LevelPrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `levels`: sparsity per parameter, in [0, 1]: with k = floor(s·n), every element whose |w| is
  /// at or below the k-th smallest is zeroed (level_mask); 0 leaves the parameter's mask alone.
  /// In YAML '*' stands for every parameter not named explicitly, biases and norm terms included
  /// (as in Distiller). Required (non-empty); default empty.
  TORCH_ARG(ParamValues, levels);
};

/// MagnitudeParameterPruner.
struct MagnitudePrunerOptions {
  MagnitudePrunerOptions() = default;
  explicit MagnitudePrunerOptions(ParamValues thresholds) : thresholds_(std::move(thresholds)) {}
  static MagnitudePrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `thresholds`: per parameter, elements with |w| ≤ t are zeroed (t in the weight's units).
  /// '*' as for levels. Required (non-empty); default empty.
  TORCH_ARG(ParamValues, thresholds);
};

/// SensitivityPruner.
struct SensitivityPrunerOptions {
  SensitivityPrunerOptions() = default;
  explicit SensitivityPrunerOptions(ParamValues sensitivities)
      : sensitivities_(std::move(sensitivities)) {}
  static SensitivityPrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `sensitivities`: per parameter, elements with |w| ≤ s·std(w) are zeroed (s in standard
  /// deviations of the parameter, taken once at the pruner's first call and kept; parameters of
  /// one element are left alone). '*' as for levels. Required (non-empty); default empty.
  TORCH_ARG(ParamValues, sensitivities);
};

/// AutomatedGradualPruner: level pruning to the AGP target of each scheduled epoch.
///
///   AgpPruner p("p", AgpPrunerOptions(0.05, 0.6, {"conv1.weight"}));
struct AgpPrunerOptions {
  AgpPrunerOptions() = default;
  AgpPrunerOptions(double initial_sparsity, double final_sparsity, std::vector<std::string> weights)
      : initial_sparsity_(initial_sparsity),
        final_sparsity_(final_sparsity),
        weights_(std::move(weights)) {}
  static AgpPrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `initial_sparsity`: fraction of elements zeroed at the policy's first epoch, in [0, 1].
  /// Required; default 0.
  TORCH_ARG(double, initial_sparsity) = 0;
  /// `final_sparsity`: fraction zeroed from the policy's last scheduled epoch on, in [0, 1] and
  /// above `initial_sparsity` (as Distiller asserts). Required; default 0.
  TORCH_ARG(double, final_sparsity) = 0;
  /// `weights`: the parameters pruned (resolved names), each to the same target. Required
  /// (non-empty); default empty.
  TORCH_ARG(std::vector<std::string>, weights);
};

/// How a ranked structure pruner measures a structure: mean |w| (L1 normalised by size) or root
/// mean square (L2).
enum class RankNorm { kL1, kL2 };

/// One weight of a ranked structure pruner.
struct RankedTarget {
  /// Parameter name (resolved).
  std::string weight;
  /// Fraction of its structures pruned, in [0, 1] (unused on the AGP schedule).
  double fraction = 0;
  /// Which structures.
  GroupType group = GroupType::kFilters;
};

/// L1RankedStructureParameterPruner, L2RankedStructureParameterPruner (norm kL2) and
/// L1/L2RankedStructureParameterPruner_AGP (agp true).
///
///   RankedStructurePruner p("p", RankedStructurePrunerOptions({{"conv1.weight", 0.5,
///   GroupType::kFilters}}));
struct RankedStructurePrunerOptions {
  RankedStructurePrunerOptions() = default;
  explicit RankedStructurePrunerOptions(std::vector<RankedTarget> targets)
      : targets_(std::move(targets)) {}
  /// The keys of L1/L2RankedStructureParameterPruner: `desired_sparsity`, `group_type`, `weights`
  /// or `reg_regims`, optional `group_dependency` and `kwargs` (`block_shape`, for Blocks).
  static RankedStructurePrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  /// The keys of L1RankedStructureParameterPruner_AGP: `initial_sparsity`, `final_sparsity`,
  /// `group_type`, `weights`, optional `group_dependency` and `kwargs`; sets agp.
  static RankedStructurePrunerOptions from_yaml_agp(YamlReader& yaml, const ModelParams& params);
  /// The keys they share without a fraction: `group_type`, `weights`, optional
  /// `group_dependency` and `kwargs`; every target's fraction is 0 (for classes that choose it
  /// otherwise, RandomLevelStructureParameterPruner). Read the class's own keys first: it finishes
  /// the reader.
  static RankedStructurePrunerOptions from_yaml_structures(YamlReader& yaml,
                                                           const ModelParams& params);
  nlohmann::json to_json() const;

  /// The weights, each with its fraction and structure: YAML `weights` with `desired_sparsity`
  /// and `group_type`, or Distiller's regularizer form `reg_regims: {param: [fraction,
  /// group_type]}`. Required (non-empty); default empty.
  TORCH_ARG(std::vector<RankedTarget>, targets);
  /// The ranking norm (the class name's L1/L2). Default kL1.
  TORCH_ARG(RankNorm, norm) = RankNorm::kL1;
  /// `group_dependency: Leader`: rank the first weight only and prune the same structures in
  /// every weight (all must have as many structures). Default false.
  TORCH_ARG(bool, leader) = false;
  /// The fraction follows the AGP schedule from initial_sparsity to final_sparsity instead of
  /// each target's fixed fraction (the `_AGP` class). Default false.
  TORCH_ARG(bool, agp) = false;
  /// `initial_sparsity` (AGP only): fraction of structures pruned at the first epoch, in [0, 1].
  /// Default 0.
  TORCH_ARG(double, initial_sparsity) = 0;
  /// `final_sparsity` (AGP only): fraction pruned from the last scheduled epoch on, in [0, 1].
  /// Default 0.
  TORCH_ARG(double, final_sparsity) = 0;
  /// `kwargs: {block_shape: [repetitions, depth, 1, 1]}`: the blocks of group_type `Blocks`
  /// (block_magnitudes() in compress/masks.h); required with Blocks and refused without. Default
  /// empty.
  TORCH_ARG(std::vector<int64_t>, block_shape);
};

// ---------------------------------------------------------------------------------------------
// Pruners.

/// Zeroes exactly floor(s·n) smallest-magnitude elements of each parameter.
class LevelPruner : public Pruner {
 public:
  LevelPruner(std::string name, LevelPrunerOptions options);
  std::vector<std::string> targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const LevelPrunerOptions& options() const { return options_; }

 private:
  LevelPrunerOptions options_;
};

/// Zeroes |w| ≤ threshold.
class MagnitudePruner : public Pruner {
 public:
  MagnitudePruner(std::string name, MagnitudePrunerOptions options);
  std::vector<std::string> targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const MagnitudePrunerOptions& options() const { return options_; }

 private:
  MagnitudePrunerOptions options_;
};

/// Zeroes |w| ≤ sensitivity · std(w), with std(w) taken at its first call and kept (Distiller's
/// SensitivityPruner: as pruning pulls weights toward zero, the fixed threshold traps more).
class SensitivityPruner : public Pruner {
 public:
  SensitivityPruner(std::string name, SensitivityPrunerOptions options);
  std::vector<std::string> targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const SensitivityPrunerOptions& options() const { return options_; }

 private:
  SensitivityPrunerOptions options_;
  /// std(w) by parameter, from the first call.
  std::map<std::string, double> stddev_;
};

/// Level pruning of every weight to agp_target() of the epoch; needs range timing.
class AgpPruner : public Pruner {
 public:
  AgpPruner(std::string name, AgpPrunerOptions options);
  std::vector<std::string> targets() const override;
  bool needs_range_timing() const override { return true; }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const AgpPrunerOptions& options() const { return options_; }

 private:
  AgpPrunerOptions options_;
};

/// L1/L2-ranked structure pruning (filters, input channels, a 2-D weight's input columns, or
/// blocks of a conv weight),
/// fixed fraction or AGP schedule, optional Leader dependency. Each call ranks the weights as they
/// are and its masks replace the previous ones (they do not multiply them); a call that prunes
/// nothing (fraction 0, or floor(fraction · N) = 0) leaves the masks as they were.
class RankedStructurePruner : public Pruner {
 public:
  RankedStructurePruner(std::string name, RankedStructurePrunerOptions options);
  std::vector<std::string> targets() const override;
  bool needs_range_timing() const override { return options_.agp(); }
  std::vector<std::string> filter_targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const RankedStructurePrunerOptions& options() const { return options_; }
  /// Structure magnitudes of `weight`; with channel groups, each filter's group is ranked as a
  /// whole (the mean of the magnitudes of all filters tied to it), so tied layers lose the same
  /// channels.
  at::Tensor magnitudes(ModelParams& params, const std::string& weight, GroupType group) const;

 private:
  RankedStructurePrunerOptions options_;
};

/// Builds a pruner of one class from its YAML mapping (keys checked by the reader).
using PrunerFactory = std::function<std::unique_ptr<Pruner>(
    const std::string& name, YamlReader& yaml, const ModelParams& params)>;

/// Pruner classes by Distiller name.
Registry<PrunerFactory>& pruner_registry();
void register_builtin_pruners();

/// Zeroes groups of `weight` in `masks` (multiplying any mask already there). Filters go with
/// their whole channel group from `params.channel_groups()`: every filter tied to them by adds and
/// concats, biases and per-channel followers (norms, PReLU slopes). Without channel groups (a
/// scheduler that was not given a tracer) filter pruning is a logic_error; a weight that writes no
/// group of its own (a grouped convolution) and channel pruning mask the weight alone.
void mask_groups(const ModelParams& params, MaskTable& masks, const std::string& weight,
                 GroupType group, const std::vector<int64_t>& pruned,
                 const at::Tensor& weight_tensor);

}  // namespace igb::compress
