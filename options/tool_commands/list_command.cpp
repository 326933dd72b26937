// igb-tools list REGISTRY: the names (and help lines) of one registry.
#include <CLI/CLI.hpp>

#include <iostream>

#include "compress/extensions.h"
#include "compress/lr_schedulers.h"
#include "compress/pruners.h"
#include "compress/quantizer.h"
#include "compress/regularizers.h"
#include "core/error.h"
#include "data/datasets.h"
#include "models/family.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

template <class R>
void print_registry(const R& r) {
  for (const auto& n : r.names()) std::cout << n << "\t" << r.entry(n).help << "\n";
}

class ListCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("registry", registry_,
                   "models | datasets | optforms | pruners | regularizers | lr_schedulers | "
                   "extensions | quantizers | commands")
        ->required()
        ->check(CLI::IsMember({"models", "datasets", "optforms", "pruners", "regularizers",
                               "lr_schedulers", "extensions", "quantizers", "commands"}));
  }

  int run() override {
    if (registry_ == "models") {
      auto& r = models::model_registry();
      for (const auto& n : r.names())
        std::cout << n << "\t" << r.entry(n).factory.family << "\t" << r.entry(n).help << "\n";
    } else if (registry_ == "datasets") {
      data::register_builtin_datasets();
      auto& r = data::dataset_registry();
      for (const auto& n : r.names()) {
        const auto& spec = r.entry(n).factory;
        std::cout << n << "\t" << spec.selected_by << "\t" << r.entry(n).help;
        // A dataset read from a Debian package says when the package is missing.
        const std::string why = spec.unavailable ? spec.unavailable() : std::string();
        if (!why.empty()) std::cout << " (unavailable: " << why << ")";
        std::cout << "\n";
      }
    } else if (registry_ == "optforms") {
      print_registry(models::family_registry());
    } else if (registry_ == "pruners") {
      print_registry(compress::pruner_registry());
    } else if (registry_ == "regularizers") {
      print_registry(compress::regularizer_registry());
    } else if (registry_ == "lr_schedulers") {
      print_registry(compress::lr_scheduler_registry());
    } else if (registry_ == "extensions") {
      print_registry(compress::extension_registry());
    } else if (registry_ == "quantizers") {
      print_registry(compress::quantizer_registry());
    } else {
      print_registry(tool_command_registry());
    }
    return kExitOk;
  }

 private:
  std::string registry_;
};

}  // namespace

void add_list_command(Registry<ToolCommandSpec>& r) {
  r.add("list", {[] { return std::make_unique<ListCommand>(); }},
        "Print a registry: models, datasets, optforms, pruners, regularizers, lr_schedulers, "
        "extensions, quantizers, commands");
}

}  // namespace igb::options
