// igb-tools macs and sparsity: a report of a model printed as a table and written as CSV and JSON.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>

#include "core/error.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"
#include "tools/macs.h"
#include "tools/report.h"
#include "tools/sparsity.h"

namespace igb::options {

namespace {

/// A report of the target model: its table printed, its --csv and --json written.
class ReportCommand : public ToolCommand {
 public:
  using Make = std::function<tools::Report(const ToolModel&)>;
  ReportCommand(bool model_allowed, Make make)
      : model_allowed_(model_allowed), make_(std::move(make)) {}

  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, model_allowed_);
    add_report_files(sub, files_);
  }
  void check_outputs() const override { files_.check(); }
  int run() override {
    configure_runtime(target_.threads, "cpu");
    const auto r = make_(target_.load());
    tools::print_report(r, std::cout);
    tools::write_report(r, files_.csv, files_.json);
    return kExitOk;
  }

 private:
  bool model_allowed_;
  Make make_;
  ToolTarget target_;
  ReportFiles files_;
};

tools::Report macs_of(const ToolModel& m) {
  return tools::macs_report(tools::compute_macs(tool_graph(m, m.input), *m.model));
}

tools::Report sparsity_of(const ToolModel& m) {
  return tools::sparsity_report(tools::model_sparsity(*m.model), m.name);
}

}  // namespace

void add_report_commands(Registry<ToolCommandSpec>& r) {
  r.add("macs", {[] { return std::make_unique<ReportCommand>(true, macs_of); }},
        "Per-layer MACs and parameter counts (conv, transposed conv, linear)");
  r.add("sparsity", {[] { return std::make_unique<ReportCommand>(false, sparsity_of); }},
        "Distiller-style weight sparsity table of a checkpoint");
}

}  // namespace igb::options
