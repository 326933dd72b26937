// igb-tools export-torchscript: any model, of the zoo or imported, trained, thinned or quantized,
// as a TorchScript file PyTorch loads (docs/byo-model.md).
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "deploy/torchscript/torchscript_export.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

class ExportTorchScriptCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, true);
    sub.add_option("--out", out_, "TorchScript file to write (.pt)")->required();
  }

  void check_outputs() const override { check_output_file("--out", out_); }

  int run() override {
    configure_runtime(target_.threads, "cpu");
    auto m = target_.load();
    auto model = m.model;
    const auto r = deploy::export_torchscript(
        *model, m.input, [&](const at::Tensor& x) { return model->forward(x); }, out_);
    std::cout << "wrote " << r.path.string() << ": " << m.name << ", input "
              << graph::shape_to_string(m.input) << ", " << r.parameters << " parameters and "
              << r.buffers << " buffers by name, " << r.ops << " ops (evaluation mode)\n"
              << "  in PyTorch: torch.jit.load(\"" << r.path.string() << "\")\n";
    return kExitOk;
  }

 private:
  ToolTarget target_;
  std::string out_;
};

}  // namespace

void add_export_torchscript_command(Registry<ToolCommandSpec>& r) {
  r.add("export-torchscript", {[] { return std::make_unique<ExportTorchScriptCommand>(); }},
        "Write the model (zoo or imported, thinned or quantized) as TorchScript for PyTorch's "
        "torch.jit.load");
}

}  // namespace igb::options
