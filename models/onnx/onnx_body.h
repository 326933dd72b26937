#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/onnx/onnx_graph.h"

namespace igb::models::onnx_import {

/// An operator of the graph failed on the values it was given (shapes the node cannot take, an
/// error of LibTorch's): an InputError naming the file and the node, kept apart from the
/// refusals of what igb does not import.
class OnnxRunError : public InputError {
 public:
  using InputError::InputError;
};

/// Where an initializer of the file lives in the rebuilt model.
struct ImportedName {
  /// The initializer's name in the file ("conv1.weight", "onnx::Conv_193").
  std::string onnx;
  /// Its name among the model's parameters or buffers ("conv1.weight", "onnx__Conv_193.weight").
  std::string igb;
  /// "parameter", "buffer" or "constant" (an integer tensor the code reads, not a tensor of the
  /// model).
  std::string kind;
};

/// An ONNX graph rebuilt as LibTorch modules and operators (docs/onnx-import.md).
///
/// Conv and ConvTranspose (2-D), Gemm and MatMul with a constant weight, BatchNormalization and
/// PRelu become torch::nn modules (Conv2d, ConvTranspose2d, Linear, BatchNorm1d/2d) or igb
/// Activations, registered in the owner under the names of their initializers made legal
/// (`layer1.0.conv1.weight` stays, `onnx::Conv_193` becomes `onnx__Conv_193.weight`), so pruning,
/// thinning and quantization see them as they see a zoo model's layers; Relu, LeakyRelu, Sigmoid,
/// Tanh and Clip(0, 6) become Activations a quantizer can rewire. Every other node runs as
/// LibTorch operators (onnx_op_table()). Other float initializers are buffers of the owner; what
/// depends on constants alone is computed once, when the body is built.
class OnnxBody {
 public:
  /// Builds the body into `owner` (which must have no parameters or children yet), running the
  /// graph once on `samples` (one tensor per graph input) to learn every value's shape. `native`
  /// false runs every node as operators (no modules). An op outside the table, or one the table
  /// refuses, is an InputError naming the file, the node, the op type and the opset.
  OnnxBody(std::shared_ptr<const OnnxGraph> graph, torch::nn::Module& owner,
           const std::vector<at::Tensor>& samples, bool native = true);
  ~OnnxBody();
  OnnxBody(OnnxBody&&) noexcept;
  OnnxBody& operator=(OnnxBody&&) noexcept;

  /// The graph's outputs for `inputs` (one tensor per graph input).
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const;

  /// Where each initializer went, in the file's order.
  const std::vector<ImportedName>& names() const;

  /// What the body holds (onnx_body.cpp).
  struct State;

 private:
  std::unique_ptr<State> s_;
};

/// The op types a graph uses that igb does not import, with the first node of each
/// ("Loop (node 'loop0')"); empty when every op is supported.
std::vector<std::string> unsupported_ops(const OnnxGraph& graph);

}  // namespace igb::models::onnx_import
