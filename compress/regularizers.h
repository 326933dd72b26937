#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/model_params.h"
#include "compress/pruners.h"
#include "core/registry.h"

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// Group structures of GroupLassoRegularizer: 2-D kernels, filters (3D), whole tensor (4D),
/// input channels, rows or columns of a 2-D weight, and Distiller's two overlapping combinations,
/// whose term is the sum of their parts' terms: rows and columns of a 2-D weight ("Rows+Cols"),
/// input channels and the whole tensor of a conv weight ("Channels+4D"). The combinations have no
/// thresholding (Distiller's group_threshold_mask refuses them too).
enum class LassoGroup { k2D, k3D, k4D, kChannels, kRows, kCols, kRowsCols, kChannels4D };

/// "2D", "3D", "4D", "Channels", "Rows", "Cols", "Rows+Cols", "Channels+4D" (a "Filters" in a
/// schedule reads as 3D, "Cols+Rows" as Rows+Cols, "4D+Channels" as Channels+4D).
std::string lasso_group_name(LassoGroup group);

/// Distiller's threshold_criteria: which magnitude of a group is compared with the strength.
enum class ThresholdCriterion {
  kNone,     ///< no thresholding (the key is absent)
  kMeanAbs,  ///< "Mean_Abs": mean |w| of the group
  kMax,      ///< "Max": max |w| of the group
};

/// A term added to the loss before backward, and optionally masks for groups that fell under
/// the threshold (Distiller's threshold_criteria), set at the last minibatch of its epochs.
class Regularizer {
 public:
  explicit Regularizer(std::string name) : name_(std::move(name)) {}
  virtual ~Regularizer() = default;
  const std::string& name() const { return name_; }
  virtual std::vector<std::string> targets() const = 0;
  virtual at::Tensor loss(ModelParams& params) const = 0;
  /// Masks zero groups whose magnitude ("Mean_Abs" or "Max") is below the strength; no-op without
  /// threshold_criteria.
  virtual void threshold(ModelParams& params, MaskTable& masks) const = 0;
  virtual bool has_threshold() const = 0;
  /// The resolved configuration as a schedule mapping ({"class": …, "reg_regims": …, …});
  /// loading it back gives the same regularizer.
  virtual nlohmann::json hyperparams() const = 0;

 private:
  std::string name_;
};

/// One parameter of an L1Regularizer.
struct L1Term {
  /// Parameter name (resolved).
  std::string param;
  /// λ: the loss term is λ·Σ|w|; thresholding zeroes |w| ≤ λ.
  double strength = 0;
};

/// One parameter of a GroupLassoRegularizer.
struct GroupLassoTerm {
  /// Parameter name (resolved).
  std::string param;
  /// λ: the loss term is λ·Σ over groups of ‖group‖₂; thresholding zeroes groups whose
  /// magnitude is ≤ λ.
  double strength = 0;
  /// The groups.
  LassoGroup group = LassoGroup::k3D;
};

/// Options of L1Regularizer. `from_yaml` reads one schedule mapping (the caller has already
/// accepted `class`), resolves names, and refuses unknown keys; `to_json` writes them back.
///
///   L1Regularizer r("l1", L1RegularizerOptions({{"conv1.weight", 1e-4}}));
struct L1RegularizerOptions {
  L1RegularizerOptions() = default;
  explicit L1RegularizerOptions(std::vector<L1Term> reg_regims)
      : reg_regims_(std::move(reg_regims)) {}
  static L1RegularizerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `reg_regims: {param: strength}`, in file order. Required (non-empty); default empty.
  TORCH_ARG(std::vector<L1Term>, reg_regims);
  /// `threshold_criteria`: Mean_Abs or Max (for single elements both are |w|). Default none.
  TORCH_ARG(ThresholdCriterion, threshold_criteria) = ThresholdCriterion::kNone;
};

/// Options of GroupLassoRegularizer; as L1RegularizerOptions.
///
///   GroupLassoRegularizer r("gl", GroupLassoRegularizerOptions({{"conv1.weight", 1e-3,
///   LassoGroup::k3D}}));
struct GroupLassoRegularizerOptions {
  GroupLassoRegularizerOptions() = default;
  explicit GroupLassoRegularizerOptions(std::vector<GroupLassoTerm> reg_regims)
      : reg_regims_(std::move(reg_regims)) {}
  static GroupLassoRegularizerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `reg_regims: {param: [strength, group]}` (group 2D, 3D or Filters, 4D, Channels, Rows,
  /// Cols; Rows and Cols need a 2-D weight, 2D and 3D a 4-D one), in file order. Required
  /// (non-empty); default empty.
  TORCH_ARG(std::vector<GroupLassoTerm>, reg_regims);
  /// `threshold_criteria`: Mean_Abs or Max. Default none.
  TORCH_ARG(ThresholdCriterion, threshold_criteria) = ThresholdCriterion::kNone;
};

/// λ·Σ|w| per parameter.
class L1Regularizer : public Regularizer {
 public:
  L1Regularizer(std::string name, L1RegularizerOptions options);
  std::vector<std::string> targets() const override;
  at::Tensor loss(ModelParams& params) const override;
  void threshold(ModelParams& params, MaskTable& masks) const override;
  bool has_threshold() const override {
    return options_.threshold_criteria() != ThresholdCriterion::kNone;
  }
  nlohmann::json hyperparams() const override;
  const L1RegularizerOptions& options() const { return options_; }

 private:
  L1RegularizerOptions options_;
};

/// λ·Σ over groups of ‖group‖₂ per parameter. Thresholding whole filters (3D) zeroes their whole
/// channel group (bias, BatchNorm, tied filters), as filter pruning does.
class GroupLassoRegularizer : public Regularizer {
 public:
  GroupLassoRegularizer(std::string name, GroupLassoRegularizerOptions options);
  std::vector<std::string> targets() const override;
  at::Tensor loss(ModelParams& params) const override;
  void threshold(ModelParams& params, MaskTable& masks) const override;
  bool has_threshold() const override {
    return options_.threshold_criteria() != ThresholdCriterion::kNone;
  }
  nlohmann::json hyperparams() const override;
  const GroupLassoRegularizerOptions& options() const { return options_; }

 private:
  GroupLassoRegularizerOptions options_;
};

/// Options of GroupVarianceRegularizer.
///
///   GroupVarianceRegularizer r("gv", GroupVarianceRegularizerOptions({{"conv1.weight", 1e-3,
///   LassoGroup::kChannels}}));
struct GroupVarianceRegularizerOptions {
  GroupVarianceRegularizerOptions() = default;
  explicit GroupVarianceRegularizerOptions(std::vector<GroupLassoTerm> reg_regims)
      : reg_regims_(std::move(reg_regims)) {}
  static GroupVarianceRegularizerOptions from_yaml(YamlReader& yaml, const ModelParams& params);
  nlohmann::json to_json() const;

  /// `reg_regims: {param: [strength, Channels]}`: 4-D convolution weights, group Channels only
  /// (as in Distiller), in file order. Required (non-empty); default empty.
  TORCH_ARG(std::vector<GroupLassoTerm>, reg_regims);
};

/// Distiller's GroupVarianceRegularizer (Torfi et al., "Attention-Based Guided Structured
/// Sparsity"): λ / var(c) per parameter, where c holds the L2 norm of each input channel
/// (sqrt(Σ w² + 1e-8) over every filter's kernel for that channel) and var is the unbiased
/// variance. Pushing the channel norms apart makes the weak channels easier to prune. It has no
/// thresholding.
class GroupVarianceRegularizer : public Regularizer {
 public:
  GroupVarianceRegularizer(std::string name, GroupVarianceRegularizerOptions options);
  std::vector<std::string> targets() const override;
  at::Tensor loss(ModelParams& params) const override;
  void threshold(ModelParams&, MaskTable&) const override {}
  bool has_threshold() const override { return false; }
  nlohmann::json hyperparams() const override;
  const GroupVarianceRegularizerOptions& options() const { return options_; }

 private:
  GroupVarianceRegularizerOptions options_;
};

using RegularizerFactory = std::function<std::unique_ptr<Regularizer>(
    const std::string& name, YamlReader& yaml, const ModelParams& params)>;

/// L1Regularizer (reg_regims {param: strength}), GroupLassoRegularizer (reg_regims
/// {param: [strength, group]}); both accept threshold_criteria: Mean_Abs | Max.
/// GroupVarianceRegularizer (reg_regims {param: [strength, Channels]}).
Registry<RegularizerFactory>& regularizer_registry();
void register_builtin_regularizers();

/// Σ over groups of the L2 norm of each group of `w`.
at::Tensor group_lasso(const at::Tensor& w, LassoGroup group);

}  // namespace igb::compress
