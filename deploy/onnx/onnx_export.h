#pragma once

#include <torch/arg.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "deploy/onnx/onnx_qdq.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// The numeric precision of an exported model.
enum class OnnxPrecision {
  /// Float32 everywhere; a fake quantization op is refused.
  kFp32,
  /// Initializers and computation in float16; the graph's inputs and outputs stay float32, with a
  /// Cast after each input and before each output (feed and read float32 as for FP32).
  kFp16,
  /// Explicit INT8 for TensorRT: fake quantizations become QuantizeLinear → DequantizeLinear
  /// (int8, zero point 0), weights of quantized (or, with a calibration, of all) Conv,
  /// ConvTranspose and Gemm layers FP32 initializer → Q → DQ per output channel (axis 0), data
  /// inputs of those layers and residual skip inputs Q/DQ per tensor (TensorRT's explicit
  /// quantization; docs/export.md).
  kInt8,
};

/// "fp32", "fp16", "int8".
std::string onnx_precision_name(OnnxPrecision p);

/// Where an INT8 export puts its QuantizeLinear/DequantizeLinear pairs.
enum class QdqPlacement {
  /// TensorRT's: on the inputs and weights of Conv, ConvTranspose and Gemm and on residual
  /// skips, int8 with zero point 0 (onnx_qdq.h).
  kTensorRt,
  /// CPU engines': also on each layer's output and bias, BatchNorm folded, uint8 activations,
  /// so that onnxruntime fuses QLinearConv / QLinearMatMul / QLinearAdd (onnx_qdq_cpu.h).
  kCpu,
};

/// The integer weights of the CPU placement, for the CPUs whose onnxruntime kernels are exact on
/// them (docs/int8.md, "Every x86 CPU").
enum class QdqCpuWeights {
  /// int8 (onnxruntime's U8S8 kernels): exact with VNNI (AVX-512 VNNI, AMX) and on ARM; on
  /// AVX2 and AVX-512 without VNNI only where no two weights of a filter could pass 16 bits
  /// against 255 (weights within 7 bits); the report says which layers could.
  kInt8,
  /// uint8 with zero point 128 (the U8U8 kernels, which widen to 16 bits first): exact on every
  /// x86 CPU.
  kUint8,
};

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
  /// Numeric precision. Default kFp32.
  TORCH_ARG(OnnxPrecision, precision) = OnnxPrecision::kFp32;
  /// kInt8 only: activation ranges of a float model (calibrate_onnx on the same graph); null for a
  /// model trained with fake quantization.
  TORCH_ARG(std::shared_ptr<const OnnxCalibration>, calibration) = nullptr;
  /// kInt8 only: where the Q/DQ pairs go. Default kTensorRt.
  TORCH_ARG(QdqPlacement, qdq_placement) = QdqPlacement::kTensorRt;
  /// kCpu only: the weights' integer type. Default kInt8.
  TORCH_ARG(QdqCpuWeights, qdq_cpu_weights) = QdqCpuWeights::kInt8;
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
  /// "fp32", "fp16" or "int8" (onnx_precision_name).
  std::string precision = "fp32";
  /// int8: "tensorrt" or "cpu" (QdqPlacement).
  std::string qdq_placement;
  /// cpu placement: the CPUs on which onnxruntime computes the file's integer sums exactly
  /// ("every x86 CPU", or "x86 CPUs with VNNI (AVX-512 VNNI, AMX)" and why).
  std::string exact_on;
  /// int8: per-tensor activation scales, keyed by the name of the ONNX value that enters the
  /// QuantizeLinear (a graph input, a layer's output name); zero point 0, x ≈ q·scale.
  std::map<std::string, double> activation_scales;
  /// int8: per-channel weight scales, keyed by the weight initializer's name (the parameter name,
  /// "layer1.0.conv1.weight"), one scale per output channel along axis 0.
  std::map<std::string, std::vector<float>> weight_scales;
  /// int8: the model's fake quantization ops as written (check_qdq_layers compares each).
  std::vector<OnnxQuantizedValue> quantized_values;
  /// Notes for the user, one line each: grids that do not map exactly onto int8 (which layer and
  /// why), quantized layers whose input stays float, residual skips left float.
  std::vector<std::string> lines;
};

/// Writes `model`, traced as `graph`, as an ONNX model of `options.precision()` (FP32 unless
/// asked) to `out` (docs/export.md): IR 7,
/// initializers named by parameter names, nodes by op names, graph input "input" and outputs
/// "output", "output_1", ... The model is checked with onnx::checker and strict shape inference
/// before it is written atomically. An op without an ONNX mapping, an argument without an ONNX
/// equivalent or a failed check throws InputError naming the op type and layer; nothing is written
/// then.
/// InputError unless `graph` can be written with `placement`: the CPU placement writes the model's
/// own fake quantizations (QAT, post-training quantization), so a float model has nothing to place
/// (calibrating it fills only residual operands); the TensorRT placement takes any model.
void check_qdq_placement(const SummaryGraph& graph, QdqPlacement placement);

OnnxExportReport export_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                             const OnnxExportOptions& options, const std::filesystem::path& out);

/// Writes the ops `ops` of `graph` (in trace order) as one ONNX model whose graph inputs are the
/// summary-graph values `inputs` and outputs `outputs`, each named as the whole model's export
/// names it (onnx_value_name): one stage of a partitioned model (deploy/partition/stages.h). FP32
/// or FP16; INT8 Q/DQ is refused.
OnnxExportReport export_onnx_ops(torch::nn::Module& model, const SummaryGraph& graph,
                                 const std::vector<int>& ops, const std::vector<int>& inputs,
                                 const std::vector<int>& outputs, const OnnxExportOptions& options,
                                 const std::filesystem::path& out);

/// export_onnx and export_onnx_ops into memory: the serialized, checked model, for a caller that
/// joins models before it writes one file (deploy/early_exit/exit_export.h).
std::string onnx_model_bytes(torch::nn::Module& model, const SummaryGraph& graph,
                             const OnnxExportOptions& options);
std::string onnx_ops_bytes(torch::nn::Module& model, const SummaryGraph& graph,
                           const std::vector<int>& ops, const std::vector<int>& inputs,
                           const std::vector<int>& outputs, const OnnxExportOptions& options);

/// The name export_onnx gives summary-graph value `value`: "input", "output", "output_1", or its
/// producing op's name ("layer1.0.relu", "split:1" for an op's second output).
std::string onnx_value_name(const SummaryGraph& graph, int value);

/// "input [N,3,32,32]" lines of a report, for printing.
std::string onnx_io_string(const OnnxIo& io);

}  // namespace igb::deploy
