#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "deploy/onnx/onnx_export.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// The TensorRT optimization profile written for the symbolic dims of an exported model, and the
/// trtexec settings of F.trtexec.sh. The batch symbol N takes min_batch/opt_batch/max_batch; every
/// other symbol (H, W) is a spatial size: min_spatial (or the traced size when smaller), the traced
/// size as the optimum, and max_spatial_factor times the traced size capped at max_spatial (never
/// below the traced size). A fixed dim keeps its size in all three shapes.
///
///   write_trt_files(report, {{1, 1, 32, 32}}, TrtProfileOptions().max_batch(64));
struct TrtProfileOptions {
  /// Smallest batch size of the profile.
  TORCH_ARG(int64_t, min_batch) = 1;
  /// Batch size TensorRT tunes its kernels for.
  TORCH_ARG(int64_t, opt_batch) = 8;
  /// Largest batch size the engine accepts.
  TORCH_ARG(int64_t, max_batch) = 32;
  /// Smallest height or width, in pixels.
  TORCH_ARG(int64_t, min_spatial) = 16;
  /// Largest height or width as a multiple of the traced size ...
  TORCH_ARG(int64_t, max_spatial_factor) = 4;
  /// ... capped at this many pixels.
  TORCH_ARG(int64_t, max_spatial) = 1024;
  /// trtexec's workspace memory pool, in MiB (--memPoolSize=workspace:N).
  TORCH_ARG(int64_t, workspace_mib) = 1024;
  /// Written into F.json as the producer; an empty version is igb's own.
  TORCH_ARG(std::string, producer_name) = "igb";
  TORCH_ARG(std::string, producer_version) = "";
};

/// The min/opt/max shapes of one graph input.
struct TrtInputProfile {
  std::string name;
  Shape min, opt, max;
  /// Whether any dim is symbolic (only those inputs get shape flags).
  bool dynamic = false;
};

/// The profile of every input of `report`; `traced` holds the traced shape of each input, in the
/// order of report.inputs (InputError when the counts or ranks differ).
std::vector<TrtInputProfile> trt_profiles(const OnnxExportReport& report,
                                          const std::vector<Shape>& traced,
                                          const TrtProfileOptions& options = {});

/// The two files written beside F.onnx.
struct TrtFiles {
  std::filesystem::path script, json;
};

/// Writes, atomically, beside report.path (F.onnx):
/// - F.trtexec.sh, an executable POSIX shell script that builds F.plan from F.onnx with trtexec,
///   for TensorRT 10.x (the default) or 8.x (first argument 8); further arguments go to trtexec.
///   Precision flags follow the report's precision: none for fp32, --fp16 for fp16, and for INT8
///   Q/DQ models --stronglyTyped (10.x) or --int8 --fp16 (8.x). Inputs with symbolic dims get
///   --minShapes/--optShapes/--maxShapes from trt_profiles.
/// - F.json: the model and engine file names, producer, opset, precision, every input and output
///   with its shape (symbolic dims as strings, others as numbers), the profile of each dynamic
///   input, the quantization scales where the report has them ("quantization": zero_point,
///   activations by value name, weights by initializer name, one scale per output channel) and
///   the report's notes.
TrtFiles write_trt_files(const OnnxExportReport& report, const std::vector<Shape>& traced,
                         const TrtProfileOptions& options = {});

}  // namespace igb::deploy
