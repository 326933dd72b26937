#pragma once

#include <map>
#include <set>
#include <string>

#include "deploy/onnx/graph_names.h"
#include "deploy/onnx/onnx_qdq.h"

namespace igb::deploy {

class OnnxWriter;

/// The INT8 Q/DQ pass of export_onnx for CPU engines (--qdq-placement cpu; docs/export.md):
/// QuantizeLinear/DequantizeLinear around every quantized layer's input, weights, bias and output,
/// the pattern onnxruntime's graph optimizer fuses into QLinearConv, QLinearMatMul and QLinearAdd.
/// The grids are the model's own (runtime/int8_grids.h: quant_form, integer_weights), as igb's
/// integer runtime runs them:
/// - activations uint8: zero point 0 for a grid that is never negative (after a ReLU, which
///   onnxruntime then drops), 128 for a signed one (the same values as int8 with zero point 0);
///   the clamp before a fake quantization is not written (the type saturates instead), so a value
///   beyond the trained range saturates at the type's end, not at the grid's (reported);
/// - weights int8 per output channel with a BatchNorm after the layer folded into their scales
///   (the integers stay the trained ones), or the same integers as uint8 with zero point 128
///   (`uint8_weights`: onnxruntime's U8U8 kernels, exact on CPUs without VNNI); bias int32 on
///   the sum's grid S_in·S_w;
/// - a residual add's operand that no fake quantization covers (a conv+BatchNorm output) gets a
///   uint8 grid (zero point 128, scale amax/127) from the calibration, so the add runs as
///   QLinearAdd; grid values through max pooling, slicing and zero padding keep their grid.
class OnnxCpuQdqPass {
 public:
  /// `calibration` holds the amax of residual add operands (calibrate_onnx); may be null.
  OnnxCpuQdqPass(OnnxWriter& w, const SummaryGraph& graph, const OnnxCalibration* calibration,
                 bool uint8_weights = false);
  /// Writes `op` (or makes its output an alias of its input) and returns true; false: the caller
  /// writes it with the ONNX mapping, reading the inputs and weights this pass set.
  bool emit(const OpNode& op);
  /// After the last op: the report's notes.
  void finish();
  const OnnxQdqRecord& record() const { return record_; }

 private:
  struct Grid {
    std::string dq;  // the DequantizeLinear output
    double scale = 1;
    int zero_point = 0;
  };
  /// The grid of value `value`: a fake quantization's, or one carried through max pooling,
  /// slicing, reshaping and zero padding (quantized again there, exactly); null when none.
  const Grid* grid_of(int value);
  /// Q → DQ of `value` on uint8 grid (scale, zero point).
  const Grid& quantize(int value, double scale, int zero_point);
  bool emit_fake_quantize(const OpNode& op);
  bool emit_layer(const OpNode& op);
  void prepare_add(const OpNode& op);
  /// The fake quantization `op`'s output reaches through ReLUs and clamps alone, or -1.
  int quantization_after(int value) const;

  OnnxWriter& w_;
  const SummaryGraph& graph_;
  const OnnxCalibration* calibration_;
  bool uint8_weights_;
  /// int8 weights: the layers two of whose weights could pass 16 bits against a uint8 input.
  std::vector<std::string> pairs_past_16_bits_;
  int layers_ = 0;
  std::map<int, Grid> grids_;
  /// Ops whose output is their input in the written graph (folded BatchNorms, clamps).
  std::set<int> aliased_;
  int dropped_clamps_ = 0;
  OnnxQdqRecord record_;
};

}  // namespace igb::deploy
