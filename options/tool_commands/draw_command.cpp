// igb-tools draw: the summary graph drawn with Graphviz.
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"
#include "tools/draw.h"

namespace igb::options {

namespace {

class DrawCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, true);
    sub.add_option("--out", path_, "Output file: .svg, .png or .dot")->required();
    sub.add_flag("--params", params_, "Also draw parameter nodes (name and shape)");
  }
  void check_outputs() const override { check_output_file("--out", path_); }
  int run() override {
    configure_runtime(target_.threads, "cpu");
    const auto m = target_.load();
    const auto g = tool_graph(m, m.input);
    tools::draw_graph(g, path_, params_);
    std::cout << "drew " << g.ops().size() << " ops of " << m.name << " to " << path_ << "\n";
    return kExitOk;
  }

 private:
  ToolTarget target_;
  std::string path_;
  bool params_ = false;
};

}  // namespace

void add_draw_command(Registry<ToolCommandSpec>& r) {
  r.add("draw", {[] { return std::make_unique<DrawCommand>(); }},
        "Draw the data-flow graph with Graphviz (.svg, .png or .dot)");
}

}  // namespace igb::options
