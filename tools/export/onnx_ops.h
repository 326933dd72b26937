#pragma once

namespace igb::tools {

class OnnxWriter;
struct OpNode;

// The ONNX emitters of the op table's rows (tools/graph/op_table.cpp), one per mapping of
// REFERENCE.md §4. Each writes the op's nodes and initializers through `w`, or throws InputError
// naming the op when an argument has no ONNX equivalent at opset 13.

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

}  // namespace igb::tools
