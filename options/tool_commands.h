#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "options/sensitivity_commands.h"
#include "tools/graph/summary_graph.h"

namespace CLI {
class App;
}

namespace igb {
class Logger;
}

namespace igb::tools {
struct OnnxExportReport;
}  // namespace igb::tools

namespace igb::options {

/// The model a tool works on: built from the registry (`--model` with options) or rebuilt from a
/// checkpoint, with the input shape to trace it on.
struct ToolModel {
  models::Model model;
  std::string name;
  tools::Shape input;
};

/// Exactly one of `model` and `checkpoint` must be given (InputError otherwise). `options` are
/// "KEY=VALUE" model arguments (as igb-train's --model-arg); `input` ("1x3x224x224", empty = the
/// model's own) overrides the dummy input shape.
ToolModel load_tool_model(const std::string& model, const std::vector<std::string>& options,
                          const std::string& checkpoint, const std::string& input);

/// The summary graph of a tool model.
tools::SummaryGraph tool_graph(const ToolModel& m, const tools::Shape& input);

/// The reports `igb-test --summary` can write.
const std::vector<std::string>& summary_kinds();

/// Runs each report of `kinds` (sparsity, macs, graph, profile) on `m`, prints the tables and
/// writes sparsity.{csv,json}, macs.{csv,json}, graph.svg and graph.dot, profile.json and
/// profile_trace.json into `out_dir`.
void write_summaries(const ToolModel& m, const std::vector<std::string>& kinds,
                     const std::filesystem::path& out_dir, Logger& logger);

/// The subcommands of igb-tools: list, macs, sparsity, draw, profile, thin, export-onnx, run,
/// sensitivity, suggest-schedule.
/// Construct on the app, parse, then run() the one that was given.
class ToolCommands {
 public:
  explicit ToolCommands(CLI::App& app);
  int run();

 private:
  struct Target {
    std::string model, checkpoint, input;
    std::vector<std::string> options;
  };
  struct Outputs {
    std::string csv, json;
  };
  void add_target(CLI::App* sub, Target& t, bool model_allowed);
  static void add_outputs(CLI::App* sub, Outputs& o);
  void add_run_command(CLI::App& app);

  // One per subcommand.
  int run_list();
  int run_macs();
  int run_sparsity();
  int run_draw();
  int run_profile();
  int run_thin();
  int run_export_onnx();
  /// export-onnx --check-layers: the written INT8 file against the model, layer by layer.
  int check_onnx_layers(ToolModel& m, const tools::SummaryGraph& graph,
                        const tools::OnnxExportReport& r);
  int run_model();

  CLI::App *list_ = nullptr, *macs_ = nullptr, *sparsity_ = nullptr, *draw_ = nullptr,
           *profile_ = nullptr, *thin_ = nullptr, *export_onnx_ = nullptr;
  std::string thin_checkpoint_, thin_out_, thin_kind_ = "both";
  std::string registry_;
  Target macs_target_, sparsity_target_, draw_target_, profile_target_;
  Outputs macs_out_, sparsity_out_, profile_out_;
  std::string draw_path_;
  bool draw_params_ = false;
  std::string batch_sizes_ = "1";
  int top_ = 10, repeats_ = 5;
  int64_t threads_ = 0;
  std::string trace_path_;
  Target onnx_target_;
  std::string onnx_out_;
  int64_t onnx_opset_ = 13;
  bool onnx_dynamic_batch_ = false, onnx_dynamic_hw_ = false;
  bool onnx_int8_ = false, onnx_fp16_ = false, onnx_check_layers_ = false;
  int64_t onnx_calibrate_ = 0;
  std::string onnx_calibration_method_ = "max";
  double onnx_percentile_ = 99.99;
  // `run`: the model on a .npy tensor.
  CLI::App* run_ = nullptr;
  struct RunArgs {
    std::string model, checkpoint, input, output, device = "cpu", random_input, compare;
    std::vector<std::string> options;
    int64_t seed = 0;
    double tolerance = 1e-4;
  } run_args_;
  // `sensitivity` and `suggest-schedule`.
  std::unique_ptr<SensitivityCommands> sensitivity_;
};

}  // namespace igb::options
