#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace igb::deploy {

/// Where onnxruntime comes from: scripts/ort_run.js of igb's source tree, run by Node.js, with
/// onnxruntime-node installed by scripts/install_onnxruntime.sh into the tree's .cache.
///
///   OnnxRuntimeRunner ort("m.onnx", "work", OnnxRuntimeOptions().threads(2));
///   at::Tensor y = ort.run(x);
struct OnnxRuntimeOptions {
  /// The Node.js program.
  TORCH_ARG(std::string, node) = "node";
  /// igb's source tree; empty: the IGB_SOURCE_DIR environment variable, else the tree this
  /// program was built from.
  TORCH_ARG(std::filesystem::path, source_dir) = "";
  /// onnxruntime's intra-op threads; 0 = its default.
  TORCH_ARG(int64_t, threads) = 0;
  /// With repeat > 0, each run also times `repeat` runs after `warmup` untimed ones.
  TORCH_ARG(int64_t, repeat) = 0;
  TORCH_ARG(int64_t, warmup) = 0;
};

/// An ONNX model's one float32 input or output as the file declares it: a symbolic dim is -1.
struct OnnxValueShape {
  std::string name;
  std::vector<int64_t> dims;
};

/// Runs one exported model (one input, one output, float32) in onnxruntime's CPU session. The
/// constructor checks that Node.js, onnxruntime-node and the model are there and reads the
/// model's input; each run writes its input as .npy into `work_dir`, runs scripts/ort_run.js and
/// reads the output back. Every failure is InputError with one line naming the model.
class OnnxRuntimeRunner {
 public:
  OnnxRuntimeRunner(std::filesystem::path model, std::filesystem::path work_dir,
                    OnnxRuntimeOptions options = {});

  /// The model's output for `x` (float32; returned on x's device). A shape the model's fixed dims
  /// do not take is refused before onnxruntime runs, naming the export flag that lifts it.
  at::Tensor run(const at::Tensor& x);
  /// Every graph output of the model for `x`, in the file's order, as (name, tensor): what
  /// check_qdq_layers reads after adding intermediate values as outputs.
  std::vector<std::pair<std::string, at::Tensor>> run_all(const at::Tensor& x);
  /// Every graph output for inputs given by name (a model with several inputs: one stage of a
  /// partitioned model). Shapes are checked by onnxruntime.
  std::vector<std::pair<std::string, at::Tensor>> run_named(
      const std::vector<std::pair<std::string, at::Tensor>>& inputs);
  /// With options.repeat > 0: the median latency of the last run, in ms.
  double last_median_ms() const { return last_median_ms_; }
  const OnnxValueShape& input() const { return input_; }
  const std::filesystem::path& model() const { return model_; }

 private:
  std::filesystem::path model_, work_dir_, script_;
  OnnxRuntimeOptions options_;
  OnnxValueShape input_;
  double last_median_ms_ = 0;
};

/// The first graph input of an ONNX file (InputError when it cannot be read or has none).
OnnxValueShape onnx_model_input(const std::filesystem::path& model);

}  // namespace igb::deploy
