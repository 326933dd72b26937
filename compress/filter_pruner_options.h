#pragma once

#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

#include "compress/model_params.h"
#include "compress/policy_timing.h"

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// The keys of Distiller's filter pruners that choose filters by something other than their
/// weights' norms (BernoulliFilterPruner, ActivationAPoZRankedFilterPruner,
/// ActivationMeanRankedFilterPruner, and their `_AGP` classes): `group_type` (`Filters` or `3D`
/// only), `weights` (conv weights), optional `group_dependency: Leader`, and either
/// `desired_sparsity` or, for `_AGP`, `initial_sparsity` and `final_sparsity`.
///
///   FilterPrunerOptions o;
///   o.weights({"conv1.weight"}).desired_sparsity(0.5);
struct FilterPrunerOptions {
  /// Reads the keys above (`agp` selects the `_AGP` keys) and finishes the reader.
  static FilterPrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params, bool agp);
  nlohmann::json to_json() const;
  /// The fraction of filters for `epoch` of a policy with `timing`: desired_sparsity, or the AGP
  /// target (agp_target in compress/pruners.h).
  double fraction(int64_t epoch, const PolicyTiming& timing) const;

  /// `weights`: the 4-D conv weights pruned (resolved names); one name may be given as a plain
  /// string. Required (non-empty); default empty.
  TORCH_ARG(std::vector<std::string>, weights);
  /// `desired_sparsity`: fraction of each weight's filters pruned, in [0, 1]. Required without
  /// agp; default 0.
  TORCH_ARG(double, desired_sparsity) = 0;
  /// The fraction follows the AGP schedule (the `_AGP` class). Default false.
  TORCH_ARG(bool, agp) = false;
  /// `initial_sparsity` (AGP only): fraction pruned at the policy's first epoch, in [0, 1].
  /// Default 0.
  TORCH_ARG(double, initial_sparsity) = 0;
  /// `final_sparsity` (AGP only): fraction pruned from its last scheduled epoch on, in [0, 1],
  /// above initial_sparsity. Default 0.
  TORCH_ARG(double, final_sparsity) = 0;
  /// `group_dependency: Leader`: the first weight's choice is applied to every weight (all must
  /// have as many filters). Default false.
  TORCH_ARG(bool, leader) = false;
};

}  // namespace igb::compress
