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
#include "graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// What an extension may read and change when it acts: the model and how to trace it, the
/// optimizer whose state follows the parameters, and the scheduler's masks.
struct ExtensionContext {
  torch::nn::Module& model;
  /// The model's input shape, for tracing it.
  const std::vector<int64_t>& input_shape;
  /// The model's forward, for tracing it; empty when the scheduler was given no tracer.
  const graph::SummaryGraph::Forward& forward;
  torch::optim::Optimizer& optimizer;
  /// The scheduler's masks, to be kept in the parameters' shapes.
  MaskTable& masks;
  /// Where progress is logged; may be null.
  Logger* logger;
  /// The schedule file, named in log lines.
  const std::string& file;
  /// How thinning rounds channel counts (compress/thinning.h); empty: it does not.
  const WidthPolicy& width;
};

/// What an extension did, for the scheduler to follow up.
struct ExtensionOutcome {
  /// Parameters changed shape: dense copies and channel groups must be rebuilt.
  bool reshaped = false;
  /// A thinning recipe to record in the checkpoint (core/thinning_recipe.h); null when none.
  nlohmann::json recipe;
};

/// An entry of a schedule's `extensions` section: acts once in each epoch its policy names, at the
/// start of the epoch's first minibatch, after the pruning policies have set and applied their
/// masks (Distiller's StructureRemover acts at on_minibatch_begin), so that epoch trains the
/// changed model.
class Extension {
 public:
  Extension(std::string name, std::string class_name)
      : name_(std::move(name)), class_name_(std::move(class_name)) {}
  virtual ~Extension() = default;
  /// The instance name in the schedule.
  const std::string& name() const { return name_; }
  /// The Distiller class ("FilterRemover").
  const std::string& class_name() const { return class_name_; }
  /// Acts on the model at the start of `epoch`.
  virtual ExtensionOutcome apply(const ExtensionContext& ctx, int64_t epoch) = 0;
  /// The resolved configuration as a schedule mapping ({"class": …, key: value, …}).
  virtual nlohmann::json hyperparams() const = 0;

 private:
  std::string name_, class_name_;
};

/// Options of Distiller's thinning extension, StructureRemover, and its aliases FilterRemover and
/// ChannelRemover.
///
///   auto o = ThinningExtensionOptions(ThinningKind::kChannels);
struct ThinningExtensionOptions {
  ThinningExtensionOptions() = default;
  explicit ThinningExtensionOptions(ThinningKind kind) : kind_(kind) {}
  /// Reads a mapping of class `cls`. As in Distiller the three classes are one, and
  /// `thinning_func_str` (remove_filters or remove_channels) says what is removed: a
  /// ChannelRemover with remove_filters removes filters. Without it a FilterRemover removes
  /// filters and a ChannelRemover channels; a StructureRemover needs it. `arch` and `dataset` are
  /// accepted and ignored, since the model knows its input shape.
  static ThinningExtensionOptions from_yaml(YamlReader& yaml, const std::string& cls);
  nlohmann::json to_json() const;

  /// What it removes: zeroed filters (remove_filters) or zeroed channels (remove_channels).
  /// Default filters.
  TORCH_ARG(ThinningKind, kind) = ThinningKind::kFilters;
};

/// The class named for a thinning kind: "FilterRemover" or "ChannelRemover".
std::string thinning_class(ThinningKind kind);
/// Distiller's thinning_func_str of a thinning kind: "remove_filters" or "remove_channels".
std::string thinning_func(ThinningKind kind);

/// Physically removes the zeroed filters or channels the summary graph shows can go
/// (plan_thinning), together with their optimizer state and masks, and logs MACs and parameters
/// before and after. It needs the scheduler's tracer. `class_name` is the class the schedule
/// named (FilterRemover, ChannelRemover or StructureRemover).
class ThinningExtension : public Extension {
 public:
  ThinningExtension(std::string name, ThinningExtensionOptions options);
  ThinningExtension(std::string name, std::string class_name, ThinningExtensionOptions options);
  const ThinningExtensionOptions& options() const { return options_; }
  ExtensionOutcome apply(const ExtensionContext& ctx, int64_t epoch) override;
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
/// Registers StructureRemover, FilterRemover and ChannelRemover; idempotent.
void register_builtin_extensions();

}  // namespace igb::compress
