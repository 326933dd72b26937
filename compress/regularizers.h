#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "compress/model_params.h"
#include "compress/pruners.h"
#include "core/registry.h"

namespace igb::compress {

class YamlReader;

/// Group structures of GroupLassoRegularizer: 2-D kernels, filters (3D), whole tensor (4D),
/// input channels, rows or columns of a 2-D weight.
enum class LassoGroup { k2D, k3D, k4D, kChannels, kRows, kCols };

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

 private:
  std::string name_;
};

using RegularizerFactory =
    std::function<std::unique_ptr<Regularizer>(const std::string& name, YamlReader& yaml, const ModelParams& params)>;

/// L1Regularizer (reg_regims {param: strength}), GroupLassoRegularizer (reg_regims
/// {param: [strength, group]}); both accept threshold_criteria: Mean_Abs | Max.
Registry<RegularizerFactory>& regularizer_registry();
void register_builtin_regularizers();

/// Σ over groups of the L2 norm of each group of `w`.
at::Tensor group_lasso(const at::Tensor& w, LassoGroup group);

}  // namespace igb::compress
