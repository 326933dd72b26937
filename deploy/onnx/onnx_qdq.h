#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deploy/onnx/graph_names.h"

namespace igb::deploy {

class OnnxWriter;

/// Activation ranges for an INT8 Q/DQ export: the amax of each value that may get a
/// QuantizeLinear/DequantizeLinear pair (the data input of every Conv, ConvTranspose and Gemm, and
/// both operands of every Add), by summary-graph value id. Scale = amax/127.
struct OnnxCalibration {
  /// Summary-graph value id → amax (max |x|, or the percentile of |x|, see calibrate_onnx).
  std::map<int, double> amax;
  /// "max" or "percentile".
  std::string method = "max";
  double percentile = 99.99;
  /// Batches the ranges were collected on.
  int64_t batches = 0;
};

/// Feeds calibration batches: calls `f` once per batch (the model's input, on the model's device).
using OnnxBatchSource = std::function<void(const std::function<void(const at::Tensor&)>& f)>;

/// Runs `graph`'s traced forward pass (no gradients) on each batch `batches` gives and records
/// the ranges export_onnx's INT8 Q/DQ needs. method "max": the largest |x| over all batches;
/// "percentile": per batch the `percentile`-th percentile of |x|, averaged over the batches.
/// InputError for another method, a percentile outside (0, 100] or no batch.
OnnxCalibration calibrate_onnx(torch::nn::Module& model, const SummaryGraph& graph,
                               const OnnxBatchSource& batches, const std::string& method,
                               double percentile);

/// A fake quantization op of the model written as QuantizeLinear → DequantizeLinear: where its
/// grid values are in the file and in the traced graph.
struct OnnxQuantizedValue {
  /// The fake quantization op's name ("layer1.0.relu1.replacement").
  std::string layer;
  /// Its output: the summary-graph value id and the ONNX value (the DequantizeLinear's output).
  int value = -1;
  std::string onnx_name;
  /// The int8 scale written (one step of the grid).
  double scale = 0;
};

/// What the Q/DQ pass wrote, gathered into OnnxExportReport.
struct OnnxQdqRecord {
  /// Every fake quantization op, in trace order.
  std::vector<OnnxQuantizedValue> quantized_values;
  /// Activation value name (the tensor before QuantizeLinear) → its scale.
  std::map<std::string, double> activation_scales;
  /// Weight initializer name → its per-output-channel scales (axis 0).
  std::map<std::string, std::vector<float>> weight_scales;
  /// Layers whose grid does not map exactly onto int8, inputs left in float, and similar notes.
  std::vector<std::string> lines;
  /// The CPU placement's OnnxExportReport::exact_on.
  std::string exact_on;
};

/// The INT8 Q/DQ pass of export_onnx (TensorRT's Q/DQ placement; docs/export.md), called per op in
/// trace order.
class OnnxQdqPass {
 public:
  /// `calibration` may be null (a model trained with fake quantization needs none).
  OnnxQdqPass(OnnxWriter& w, const SummaryGraph& graph, const OnnxCalibration* calibration);
  /// Before `op` is emitted: Q/DQ for its data input and weight (Conv, ConvTranspose, Gemm) or
  /// its skip input (a residual Add), through the writer's input overrides and parameter aliases.
  void before(const OpNode& op);
  /// Emits a fake quantization op as QuantizeLinear → DequantizeLinear (int8, zero point 0).
  void emit_fake_quantize(const OpNode& op);
  const OnnxQdqRecord& record() const { return record_; }

 private:
  /// Q → DQ of value `value` with per-tensor `scale`, shared by every consumer that asks.
  std::string activation(int value, double scale);
  /// Q/DQ of `op`'s weight per output channel. A trained grid that does not fit int8 is moved to
  /// the nearest int8 grid when the input is quantized, and left float (exact) when it is not.
  void weight(const OpNode& op, bool input_quantized);
  /// The scale of the grid value `v` lies on when it is a (zero-padded, sliced, reshaped) copy of
  /// a Q/DQ value; 0 when not known.
  double grid_scale_of(int value) const;

  OnnxWriter& w_;
  const SummaryGraph& graph_;
  const OnnxCalibration* calibration_;
  /// Value id → (DequantizeLinear output, scale).
  std::map<int, std::pair<std::string, double>> dq_;
  OnnxQdqRecord record_;
};

}  // namespace igb::deploy
