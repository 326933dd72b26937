#pragma once

#include "deploy/onnx/graph_names.h"

namespace igb::deploy {

class OnnxWriter;

/// Writes the ONNX nodes of one op; throws InputError naming the op when its arguments have no
/// ONNX equivalent.
using OnnxEmit = void (*)(OnnxWriter& writer, const OpNode& op);

/// How the exporter writes one op kind of the summary graph: the ONNX operator and the function
/// that writes its nodes. The op table (graph/op_table.h) says what an op is; this mapping,
/// the exporter's own, says how ONNX spells it, so the graph and compression never link ONNX.
struct OnnxMapping {
  /// ONNX operator the op exports to, or nullptr when it has no mapping.
  const char* op = nullptr;
  /// Writes the op's nodes, or nullptr when the exporter cannot write the op (on its own: a fake
  /// quantization is written by the Q/DQ pass).
  OnnxEmit emit = nullptr;
};

/// The mapping of `kind` (empty for an op the exporter does not know).
const OnnxMapping& onnx_mapping(OpKind kind);

// The emitters of the mapping, one per ONNX mapping of docs/export.md (opset 13). Each writes the
// op's nodes and initializers through `w`, or throws InputError naming the op when an argument
// has no ONNX equivalent at opset 13.

void emit_conv(OnnxWriter& w, const OpNode& op);
void emit_conv_transpose(OnnxWriter& w, const OpNode& op);
void emit_linear(OnnxWriter& w, const OpNode& op);
void emit_matmul(OnnxWriter& w, const OpNode& op);
void emit_batch_norm(OnnxWriter& w, const OpNode& op);
void emit_instance_norm(OnnxWriter& w, const OpNode& op);
/// Relu, Tanh, Sigmoid, Abs, Neg, Exp, Sqrt: the row's ONNX op on the one input.
void emit_unary(OnnxWriter& w, const OpNode& op);
/// ReLU6, hardtanh and clamp: Clip with its bounds as inputs.
void emit_clip(OnnxWriter& w, const OpNode& op);
void emit_prelu(OnnxWriter& w, const OpNode& op);
void emit_leaky_relu(OnnxWriter& w, const OpNode& op);
void emit_elu(OnnxWriter& w, const OpNode& op);
void emit_silu(OnnxWriter& w, const OpNode& op);
void emit_hardswish(OnnxWriter& w, const OpNode& op);
void emit_max_pool(OnnxWriter& w, const OpNode& op);
void emit_avg_pool(OnnxWriter& w, const OpNode& op);
void emit_adaptive_pool(OnnxWriter& w, const OpNode& op);
/// Add, Sub, Mul, Div with tensor or scalar operands (and add/sub's alpha).
void emit_arithmetic(OnnxWriter& w, const OpNode& op);
void emit_concat(OnnxWriter& w, const OpNode& op);
void emit_flatten(OnnxWriter& w, const OpNode& op);
void emit_reshape(OnnxWriter& w, const OpNode& op);
void emit_pixel_shuffle(OnnxWriter& w, const OpNode& op);
void emit_pad(OnnxWriter& w, const OpNode& op);
void emit_upsample(OnnxWriter& w, const OpNode& op);
void emit_slice(OnnxWriter& w, const OpNode& op);
/// Dropout (eval), contiguous, clone: no node; the output is the input.
void emit_pass_through(OnnxWriter& w, const OpNode& op);
void emit_cast(OnnxWriter& w, const OpNode& op);
void emit_mean(OnnxWriter& w, const OpNode& op);
/// Softmax and LogSoftmax along one axis.
void emit_softmax(OnnxWriter& w, const OpNode& op);

}  // namespace igb::deploy
