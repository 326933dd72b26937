#pragma once

#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "compress/pruners.h"

namespace igb::compress {

/// SplicingPruner (Dynamic Network Surgery, Guo et al. 2016): prunes and splices.
///
///   SplicingPruner p("p", SplicingPrunerOptions({{"conv1.weight", 0.5}}, 0.9, 1.1));
struct SplicingPrunerOptions {
  SplicingPrunerOptions() = default;
  SplicingPrunerOptions(ParamValues sensitivities, double low_thresh_mult, double hi_thresh_mult)
      : sensitivities_(std::move(sensitivities)),
        low_thresh_mult_(low_thresh_mult),
        hi_thresh_mult_(hi_thresh_mult) {}
  static SplicingPrunerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `sensitivities: {param or '*': s}`: s scales the standard deviation in the thresholds (in
  /// standard deviations of |w|). '*' stands for every parameter not named explicitly. Required
  /// (non-empty); default empty.
  TORCH_ARG(ParamValues, sensitivities);
  /// `low_thresh_mult`: a weight with |w| below (mean|w| + s·std|w|)·low_thresh_mult is pruned.
  /// Required; default 0.
  TORCH_ARG(double, low_thresh_mult) = 0;
  /// `hi_thresh_mult`: a weight with |w| at or above (mean|w| + s·std|w|)·hi_thresh_mult is kept
  /// (spliced back when it was pruned); between the two thresholds the mask stays as it was.
  /// Required; default 0.
  TORCH_ARG(double, hi_thresh_mult) = 0;
  /// `sensitivity_multiplier`: when above 0, s grows linearly with the policy's epochs:
  /// s·((epoch − starting_epoch)·sensitivity_multiplier + 1). Default 0.
  TORCH_ARG(double, sensitivity_multiplier) = 0;
};

/// Distiller's SplicingPruner: with t = mean|w| + s·std|w| (the mean and standard deviation of
/// |w| taken at its first call and kept), each call zeroes the mask where |w| < t·low_thresh_mult,
/// sets it to 1 where |w| ≥ t·hi_thresh_mult, and keeps the previous mask in between, so weights
/// that grow back (kept dense by mask_on_forward_only or use_double_copies) are revived. A
/// parameter of one element (no standard deviation) is left alone.
class SplicingPruner : public Pruner {
 public:
  SplicingPruner(std::string name, SplicingPrunerOptions options);
  std::vector<std::string> targets() const override;
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                 const PolicyTiming& timing) override;
  nlohmann::json hyperparams() const override;
  const SplicingPrunerOptions& options() const { return options_; }

 private:
  SplicingPrunerOptions options_;
  /// (mean |w|, std |w|) by parameter, from the first call.
  std::map<std::string, std::pair<double, double>> stats_;
};

/// Adds SplicingPruner to the pruner registry.
void register_splicing_pruner(Registry<PrunerFactory>& registry);

}  // namespace igb::compress
