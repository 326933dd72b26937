#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compress/masks.h"
#include "compress/model_params.h"
#include "compress/policy_timing.h"
#include "core/registry.h"

namespace igb::compress {

class YamlReader;

/// Masks by parameter name (1 keep, 0 pruned), owned by the scheduler.
using MaskTable = std::map<std::string, at::Tensor>;

/// AGP's target sparsity at `epoch` of a policy (REFERENCE.md §2): with
/// span = ((end − start − 1) // freq) · freq, final + (initial − final)·(1 − (epoch − start)/span)³;
/// the last scheduled epoch reaches `final` exactly.
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
  virtual void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch, const PolicyTiming& timing) = 0;
  /// Whether the policy's timing must be a range (AGP needs start, end and frequency).
  virtual bool needs_range_timing() const { return false; }
  /// Targets whose whole filters it removes (their channel groups go with them).
  virtual std::vector<std::string> filter_targets() const { return {}; }

 private:
  std::string name_;
};

/// Builds a pruner of one class from its YAML mapping (keys checked by the reader).
using PrunerFactory =
    std::function<std::unique_ptr<Pruner>(const std::string& name, YamlReader& yaml, const ModelParams& params)>;

/// Pruner classes by Distiller name.
Registry<PrunerFactory>& pruner_registry();
void register_builtin_pruners();

/// Zeroes groups of `weight` in `masks`; for filters also its bias and the following BatchNorm.
void mask_groups(const ModelParams& params, MaskTable& masks, const std::string& weight, GroupType group,
                 const std::vector<int64_t>& pruned, const at::Tensor& weight_tensor);

}  // namespace igb::compress
