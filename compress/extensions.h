#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compress/pruners.h"
#include "compress/thinning.h"
#include "core/registry.h"
#include "tools/graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb::compress {

class YamlReader;

/// What an extension may read and change when it acts: the model and how to trace it, the
/// optimizer whose state follows the parameters, and the scheduler's masks.
struct ExtensionContext {
  torch::nn::Module& model;
  /// The model's input shape, for tracing it.
  const std::vector<int64_t>& input_shape;
  /// The model's forward, for tracing it; empty when the scheduler was given no tracer.
  const tools::SummaryGraph::Forward& forward;
  torch::optim::Optimizer& optimizer;
  /// The scheduler's masks, to be kept in the parameters' shapes.
  MaskTable& masks;
  /// Where progress is logged; may be null.
  Logger* logger;
  /// The schedule file, named in log lines.
  const std::string& file;
};

/// What an extension did, for the scheduler to follow up.
struct ExtensionOutcome {
  /// Parameters changed shape: dense copies and channel groups must be rebuilt.
  bool reshaped = false;
  /// A thinning recipe to record in the checkpoint (core/thinning_recipe.h); null when none.
  nlohmann::json recipe;
};

/// An entry of a schedule's `extensions` section: acts at the end of the epochs its policy names,
/// after every other policy of the epoch (Distiller's extensions act at epoch end).
class Extension {
 public:
  Extension(std::string name, std::string class_name)
      : name_(std::move(name)), class_name_(std::move(class_name)) {}
  virtual ~Extension() = default;
  /// The instance name in the schedule.
  const std::string& name() const { return name_; }
  /// The Distiller class ("FilterRemover").
  const std::string& class_name() const { return class_name_; }
  virtual ExtensionOutcome on_epoch_end(const ExtensionContext& ctx, int64_t epoch) = 0;
  /// The resolved configuration as a schedule mapping ({"class": …, key: value, …}).
  virtual nlohmann::json hyperparams() const = 0;

 private:
  std::string name_, class_name_;
};

/// Options of Distiller's thinning extensions, FilterRemover and ChannelRemover.
///
///   auto o = ThinningExtensionOptions(ThinningKind::kChannels);
struct ThinningExtensionOptions {
  ThinningExtensionOptions() = default;
  explicit ThinningExtensionOptions(ThinningKind kind) : kind_(kind) {}
  /// Reads a FilterRemover (kind kFilters) or ChannelRemover (kChannels) mapping:
  /// `thinning_func_str` may be given but must be the class's own function (remove_filters,
  /// remove_channels); `arch` and `dataset` are accepted and ignored, since the model knows its
  /// input shape.
  static ThinningExtensionOptions from_yaml(YamlReader& yaml, ThinningKind kind);
  nlohmann::json to_json() const;

  /// What it removes: zeroed filters (remove_filters) or zeroed channels (remove_channels).
  /// Default filters.
  TORCH_ARG(ThinningKind, kind) = ThinningKind::kFilters;
};

/// Distiller's class name of a thinning kind: "FilterRemover" or "ChannelRemover".
std::string thinning_class(ThinningKind kind);
/// Distiller's thinning_func_str of a thinning kind: "remove_filters" or "remove_channels".
std::string thinning_func(ThinningKind kind);

/// Physically removes the zeroed filters or channels the summary graph shows can go
/// (plan_thinning), together with their optimizer state and masks, and logs MACs and parameters
/// before and after. It needs the scheduler's tracer.
class ThinningExtension : public Extension {
 public:
  ThinningExtension(std::string name, ThinningExtensionOptions options);
  const ThinningExtensionOptions& options() const { return options_; }
  ExtensionOutcome on_epoch_end(const ExtensionContext& ctx, int64_t epoch) override;
  nlohmann::json hyperparams() const override;

 private:
  ThinningExtensionOptions options_;
};

/// Builds an extension of one class from its YAML mapping (the caller has accepted `class` and
/// checks for unknown keys afterwards).
using ExtensionFactory =
    std::function<std::unique_ptr<Extension>(const std::string& name, YamlReader& yaml)>;

/// Extension classes by Distiller name.
Registry<ExtensionFactory>& extension_registry();
/// Registers FilterRemover and ChannelRemover; idempotent.
void register_builtin_extensions();

}  // namespace igb::compress
