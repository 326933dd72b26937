#pragma once

// The integer grids a quantized model lies on, read from its summary graph: what a fake
// quantization's output holds exactly in 8 bits, the integers and scales of a quantized layer's
// weights, the BatchNorm constants its scales absorb, and the worst pair of products its weights
// can form. The public face of runtime/'s INT8 knowledge: runtime/ compiles its INT8 layers from
// it, and deploy/'s CPU Q/DQ placement (deploy/onnx/onnx_qdq_cpu.h) writes the same grids to ONNX.
// Defined in op_forms.cpp and int8_pairs.cpp.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "compress/batchnorm_folding.h"

namespace igb::graph {
class SummaryGraph;
}  // namespace igb::graph

namespace igb::runtime {

/// A fake quantization an 8-bit integer tensor holds exactly: x = q·scale with q in [lo, hi]
/// (the grid [quant_min, quant_max] less the zero point, narrowed by a clamp just before it), in
/// u8 (`is_unsigned`: the values are never negative, after a ReLU or a clamp from 0) or s8. A
/// zero point shifting a signed grid into [0, 255] (Distiller's symmetric post-training grid,
/// zero point 128) is the s8 grid itself. Nothing when the range does not fit the type.
struct QuantForm {
  double scale = 1;
  bool is_unsigned = true;
  int64_t lo = -128, hi = 127;
  /// Whether the value the quantization reads is already within [lo, hi]·scale (a clamp with
  /// these bounds before it), so that rounding and the type's saturation alone give the grid.
  bool clamped = false;
};
std::optional<QuantForm> quant_form(const graph::SummaryGraph& graph, int op);

/// A quantized layer's weights as integers: W = q·scale[c] for output channel c, |q| ≤ 127.
struct IntegerWeights {
  at::Tensor q;      // int8, the weight's shape
  at::Tensor scale;  // float32, [out channels]
};
/// The integer grid of `weight` (the values a quantizer of `bits` bits, or of fewer, wrote:
/// symmetric range-linear, per channel or per tensor, or DoReFa): per output channel the scale is
/// max|W_c| / n, or max|W| / n over the whole tensor, for n = 2^(bits−1) − 1 or 2^bits − 1 first,
/// then the other 2^k − 1 ≤ 127, whichever first makes every value of the channel an integer
/// multiple. Nothing when a channel fits none (asymmetric grids, 8-bit DoReFa).
std::optional<IntegerWeights> integer_weights(const at::Tensor& weight, int64_t bits);

/// An eval-mode BatchNorm with constant statistics.
std::optional<compress::BatchNormParams> batchnorm_form(const graph::SummaryGraph& graph, int op);

/// The largest sum of the magnitudes of two weights of the same sign within one output channel
/// of integer weights `q` ([out, …]): the worst pair any blocking of the kernel can form.
int64_t largest_pair(const at::Tensor& q);

}  // namespace igb::runtime
