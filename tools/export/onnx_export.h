#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/graph/summary_graph.h"

namespace igb::tools {

/// How export_onnx writes a model.
///
///   auto report = export_onnx(*model, graph, OnnxExportOptions().dynamic_batch(true), "m.onnx");
struct OnnxExportOptions {
  /// ONNX opset of the default domain; only 13 is written.
  TORCH_ARG(int64_t, opset) = 13;
  /// Declare the batch dim of inputs and outputs as the symbol N.
  TORCH_ARG(bool, dynamic_batch) = false;
  /// Declare the spatial dims of 4-D inputs and outputs as symbols: H and W on the input (and on
  /// an output of the same traced size), H_out and W_out on an output of another size.
  TORCH_ARG(bool, dynamic_hw) = false;
  /// Written into the model's producer_name and producer_version.
  TORCH_ARG(std::string, producer_name) = "igb";
  TORCH_ARG(std::string, producer_version) = "";
};

/// A graph input or output of the written model.
struct OnnxIo {
  std::string name;
  /// Dims, a symbolic one as its name ("N", "H").
  std::vector<std::string> dims;
};

/// What export_onnx wrote.
struct OnnxExportReport {
  std::filesystem::path path;
  int64_t opset = 13;
  int64_t nodes = 0;
  int64_t initializers = 0;
  std::vector<OnnxIo> inputs, outputs;
};

/// Writes `model`, traced as `graph`, as an FP32 ONNX model to `out` (REFERENCE.md §4): IR 7,
/// initializers named by parameter names, nodes by op names, graph input "input" and outputs
/// "output", "output_1", ... The model is checked with onnx::checker and strict shape inference
/// before it is written atomically. An op without an ONNX mapping, an argument without an ONNX
/// equivalent or a failed check throws InputError naming the op type and layer; nothing is written
/// then.
OnnxExportReport export_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                             const OnnxExportOptions& options, const std::filesystem::path& out);

/// "input [N,3,32,32]" lines of a report, for printing.
std::string onnx_io_string(const OnnxIo& io);

}  // namespace igb::tools
