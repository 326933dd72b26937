#pragma once

// What oneDNN form an op of the summary graph has, read from its traced node: a layer's weights
// and geometry, an activation's eltwise algorithm, a pooling's window. Each returns nothing when
// the op has no such form (a computed weight, a padding oneDNN cannot express, ...), and the op
// then runs as LibTorch's operator. Internal to runtime/.

#include <ATen/core/Tensor.h>

#include <dnnl.hpp>
#include <optional>
#include <vector>

#include "compress/batchnorm_folding.h"

namespace igb::tools {
class SummaryGraph;
}  // namespace igb::tools

namespace torch::jit {
struct Value;
}  // namespace torch::jit

namespace igb::runtime {

/// A convolution, transposed convolution or linear layer with constant weights.
struct LayerForm {
  enum class Kind { kConvolution, kTransposedConvolution, kLinear };
  Kind kind = Kind::kConvolution;
  /// The traced value the layer reads.
  const torch::jit::Value* input = nullptr;
  at::Tensor weight, bias;  // bias undefined when the layer has none
  std::vector<int64_t> stride, padding, dilation, output_padding;
  /// Bottom and right padding of a convolution (the top and left are `padding`).
  std::vector<int64_t> padding_r;
  int64_t groups = 1;
};
std::optional<LayerForm> layer_form(const tools::SummaryGraph& graph, int op);

/// An elementwise activation as oneDNN's eltwise algorithm with its alpha and beta.
struct EltwiseForm {
  dnnl::algorithm algorithm = dnnl::algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
};
std::optional<EltwiseForm> eltwise_form(const tools::SummaryGraph& graph, int op);

/// A PReLU's slopes (one, or one per channel), when constant.
std::optional<at::Tensor> prelu_form(const tools::SummaryGraph& graph, int op);

/// An eval-mode BatchNorm with constant statistics.
std::optional<compress::BatchNormParams> batchnorm_form(const tools::SummaryGraph& graph, int op);

/// A 2-D max or average pooling (adaptive average pooling whose output divides its input
/// included) as one oneDNN pooling window; the right and bottom padding make oneDNN's output
/// size the traced one (ceil_mode).
struct PoolForm {
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
  std::vector<int64_t> kernel, stride, padding_l, padding_r;
};
std::optional<PoolForm> pool_form(const tools::SummaryGraph& graph, int op);

/// An add of two tensors of one shape with alpha 1: the summary-graph value ids of its operands.
std::optional<std::pair<int, int>> add_form(const tools::SummaryGraph& graph, int op);

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
std::optional<QuantForm> quant_form(const tools::SummaryGraph& graph, int op);

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

}  // namespace igb::runtime
