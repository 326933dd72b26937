#include "compress/extensions.h"

#include <mutex>
#include <utility>
#include <vector>

#include "core/logger.h"
#include "core/yaml_reader.h"

namespace igb::compress {

std::string thinning_class(ThinningKind kind) {
  return kind == ThinningKind::kFilters ? "FilterRemover" : "ChannelRemover";
}

std::string thinning_func(ThinningKind kind) {
  return kind == ThinningKind::kFilters ? "remove_filters" : "remove_channels";
}

ThinningExtensionOptions ThinningExtensionOptions::from_yaml(YamlReader& yaml,
                                                             const std::string& cls) {
  const std::string func =
      cls == "StructureRemover"
          ? yaml.get<std::string>("thinning_func_str")
          : yaml.get<std::string>("thinning_func_str",
                                  thinning_func(cls == "ChannelRemover" ? ThinningKind::kChannels
                                                                        : ThinningKind::kFilters));
  yaml.ignore({"arch", "dataset"});  // the model knows its input shape
  for (const auto kind : {ThinningKind::kFilters, ThinningKind::kChannels})
    if (func == thinning_func(kind)) return ThinningExtensionOptions(kind);
  throw InputError(yaml.where("thinning_func_str") + ": " + yaml.path() + ".thinning_func_str '" +
                   func + "' is unknown; valid: remove_filters, " + "remove_channels");
}

nlohmann::json ThinningExtensionOptions::to_json() const {
  return {{"thinning_func_str", thinning_func(kind())}};
}

ThinningExtension::ThinningExtension(std::string name, ThinningExtensionOptions options)
    : Extension(std::move(name), thinning_class(options.kind())), options_(options) {}

ThinningExtension::ThinningExtension(std::string name, std::string class_name,
                                     ThinningExtensionOptions options)
    : Extension(std::move(name), std::move(class_name)), options_(options) {}

nlohmann::json ThinningExtension::hyperparams() const {
  nlohmann::json j = options_.to_json();
  j["class"] = class_name();
  return j;
}

ExtensionOutcome ThinningExtension::apply(const ExtensionContext& ctx, int64_t epoch) {
  if (!ctx.forward) throw std::logic_error("thinning needs set_tracer() on the scheduler");
  const auto kind = options_.kind();
  const auto graph = graph::SummaryGraph::build(ctx.model, ctx.input_shape, ctx.forward);
  const auto plan = plan_thinning(ctx.model, graph, kind, ctx.width);
  const std::string head = ctx.file + ": extension " + name() + " (" + class_name() +
                           ") at epoch " + std::to_string(epoch);
  ExtensionOutcome outcome;
  if (plan.empty()) {
    if (ctx.logger) {
      ctx.logger->info(head + ": no zeroed " +
                       (kind == ThinningKind::kFilters ? "filters" : "channels") +
                       " that can be removed");
      for (const auto& line : plan.log) ctx.logger->info("  " + line);
    }
    return outcome;
  }
  int64_t before = 0, after = 0;
  for (const auto& t : ctx.model.parameters()) before += t.numel();
  thin_for_training(ctx.model, plan.recipe, &ctx.optimizer, &ctx.masks);
  outcome.reshaped = true;
  for (const auto& t : ctx.model.parameters()) after += t.numel();
  const int64_t macs_after =
      graph::SummaryGraph::build(ctx.model, ctx.input_shape, ctx.forward).total_macs();
  if (ctx.logger) {
    ctx.logger->info(
        head + ": removed " + std::to_string(plan.removed_groups) + " channel groups" +
        (plan.rounded_groups
             ? " (" + std::to_string(plan.rounded_groups) + " more kept to round widths)"
             : std::string()) +
        "; MACs " + std::to_string(graph.total_macs()) + " -> " + std::to_string(macs_after) +
        ", parameters " + std::to_string(before) + " -> " + std::to_string(after));
    for (const auto& line : plan.log) ctx.logger->info("  " + line);
  }
  outcome.recipe = plan.recipe;
  outcome.recipe["epoch"] = epoch;
  outcome.recipe["macs_before"] = graph.total_macs();
  outcome.recipe["macs_after"] = macs_after;
  outcome.recipe["params_before"] = before;
  outcome.recipe["params_after"] = after;
  return outcome;
}

Registry<ExtensionFactory>& extension_registry() {
  static Registry<ExtensionFactory> r("extension class");
  return r;
}

void register_builtin_extensions() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = extension_registry();
    // Distiller's FilterRemover and ChannelRemover are aliases of StructureRemover.
    const std::vector<std::pair<std::string, std::string>> classes = {
        {"StructureRemover", "thinning_func_str: remove_filters | remove_channels"},
        {"FilterRemover", "thinning_func_str: remove_filters (default) | remove_channels"},
        {"ChannelRemover", "thinning_func_str: remove_channels (default) | remove_filters"}};
    for (const auto& [cls, keys] : classes)
      r.add(
          cls,
          [cls = cls](const std::string& name, YamlReader& yaml) -> std::unique_ptr<Extension> {
            return std::make_unique<ThinningExtension>(
                name, cls, ThinningExtensionOptions::from_yaml(yaml, cls));
          },
          keys +
              "; physically removes zeroed filters or channels at the start of the policy's "
              "epochs");
    r.freeze();
  });
}

}  // namespace igb::compress
