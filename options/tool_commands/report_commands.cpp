// igb-tools macs, sparsity and summary: a report of a model printed as a table and written as CSV
// and JSON.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <map>

#include "core/error.h"
#include "graph/summary_graph.h"
#include "models/import/import_hook.h"
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

std::string shape_text(const at::Tensor& t) {
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

/// The model's parameters and buffers; for a model brought as a file, the name each has in the
/// file (an ONNX initializer's, made legal or taken from its layer's scope) and the file's tensors
/// its code reads as constants.
tools::Report summary_of(const ToolModel& m) {
  tools::Report r;
  r.title = "Summary of " + m.name + " on input " + graph::shape_to_string(m.input);
  r.table.columns = {"Name", "Kind", "Shape", "Elements", "Name in the file"};
  const auto* imported = dynamic_cast<const models::ImportedFrom*>(m.model.get());
  std::map<std::string, std::string> file_name;
  std::vector<models::SourceName> unplaced;
  if (imported)
    for (const auto& n : imported->source_names()) {
      if (n.model_name.empty())
        unplaced.push_back(n);
      else
        file_name[n.model_name] = n.file_name;
    }
  nlohmann::json tensors = nlohmann::json::array();
  int64_t params = 0;
  auto add = [&](const std::string& name, const char* kind, const at::Tensor& t) {
    const std::string source = file_name.count(name) ? file_name[name] : "";
    r.table.rows.push_back({name, kind, shape_text(t), std::to_string(t.numel()), source});
    tensors.push_back({{"name", name},
                       {"kind", kind},
                       {"shape", t.sizes().vec()},
                       {"elements", t.numel()},
                       {"file_name", source}});
  };
  for (const auto& p : m.model->named_parameters()) {
    add(p.key(), "parameter", p.value());
    params += p.value().numel();
  }
  for (const auto& b : m.model->named_buffers()) add(b.key(), "buffer", b.value());
  for (const auto& n : unplaced) {
    r.table.rows.push_back({"", n.kind, "", "", n.file_name});
    tensors.push_back({{"name", ""}, {"kind", n.kind}, {"file_name", n.file_name}});
  }
  r.footer = {"Total parameters: " + tools::grouped(params)};
  if (imported) r.footer.push_back("Imported from " + imported->source_file());
  r.json = {{"model", m.name},
            {"input", m.input},
            {"total_params", params},
            {"file", imported ? imported->source_file() : ""},
            {"tensors", tensors}};
  return r;
}

}  // namespace

void add_report_commands(Registry<ToolCommandSpec>& r) {
  r.add("macs", {[] { return std::make_unique<ReportCommand>(true, macs_of); }},
        "Per-layer MACs and parameter counts (conv, transposed conv, linear)");
  r.add("sparsity", {[] { return std::make_unique<ReportCommand>(false, sparsity_of); }},
        "Distiller-style weight sparsity table of a checkpoint");
  r.add("summary", {[] { return std::make_unique<ReportCommand>(true, summary_of); }},
        "Parameters and buffers of a model, and for one brought as a file (onnx:PATH, "
        "torchscript:PATH) the name each has in the file");
}

}  // namespace igb::options
