#pragma once

// What oneDNN form an op of the summary graph has, read from its traced node: a layer's weights
// and geometry, an activation's eltwise algorithm, a pooling's window. Each returns nothing when
// the op has no such form (a computed weight, a padding oneDNN cannot express, ...), and the op
// then runs as LibTorch's operator. Internal to runtime/; what another layer may read of it (the
// integer grids and a BatchNorm's constants) is runtime/int8_grids.h.

#include <ATen/core/Tensor.h>

#include <dnnl.hpp>
#include <optional>
#include <vector>

#include "compress/batchnorm_folding.h"
#include "runtime/int8_grids.h"

namespace igb::graph {
class SummaryGraph;
}  // namespace igb::graph

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
std::optional<LayerForm> layer_form(const graph::SummaryGraph& graph, int op);

/// An elementwise activation as oneDNN's eltwise algorithm with its alpha and beta.
struct EltwiseForm {
  dnnl::algorithm algorithm = dnnl::algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
};
std::optional<EltwiseForm> eltwise_form(const graph::SummaryGraph& graph, int op);

/// A PReLU's slopes (one, or one per channel), when constant.
std::optional<at::Tensor> prelu_form(const graph::SummaryGraph& graph, int op);

/// A 2-D max or average pooling (adaptive average pooling whose output divides its input
/// included) as one oneDNN pooling window; the right and bottom padding make oneDNN's output
/// size the traced one (ceil_mode).
struct PoolForm {
  dnnl::algorithm algorithm = dnnl::algorithm::pooling_max;
  std::vector<int64_t> kernel, stride, padding_l, padding_r;
};
std::optional<PoolForm> pool_form(const graph::SummaryGraph& graph, int op);

/// An add of two tensors of one shape with alpha 1: the summary-graph value ids of its operands.
std::optional<std::pair<int, int>> add_form(const graph::SummaryGraph& graph, int op);

}  // namespace igb::runtime
