#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "models/onnx/onnx_graph.h"

namespace igb::models::onnx_import {

/// What an op's builder may read of its node while the model is built: the node's attributes,
/// which inputs are constants (initializers, Constant nodes and what is computed from them alone)
/// and the value of every input on the sample input the model is built with.
class NodeView {
 public:
  NodeView(const OnnxNode& node, int64_t opset, std::string file, std::vector<at::Tensor> constants,
           std::vector<at::Tensor> samples);

  const OnnxNode& node() const { return node_; }
  /// The version of the default domain the model imports.
  int64_t opset() const { return opset_; }

  bool has(const std::string& attr) const;
  int64_t i(const std::string& attr, int64_t fallback) const;
  float f(const std::string& attr, float fallback) const;
  std::string s(const std::string& attr, const std::string& fallback) const;
  /// An INTS attribute; empty when absent.
  std::vector<int64_t> ints(const std::string& attr) const;
  std::vector<float> floats(const std::string& attr) const;
  /// A TENSOR attribute, as a tensor; undefined when absent.
  at::Tensor tensor(const std::string& attr) const;

  /// The number of inputs the node lists (optional ones left out in the middle count).
  size_t inputs() const { return node_.inputs.size(); }
  /// Whether input `i` is given (listed and not "").
  bool has_input(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  /// The value of input `i` when it is a constant; undefined otherwise.
  const at::Tensor& constant(size_t i) const;
  /// The value of input `i` on the sample input; undefined when not given.
  const at::Tensor& sample(size_t i) const;

  /// "FILE: node 'x' (Op, opset N): why", as an InputError.
  [[noreturn]] void refuse(const std::string& why) const;
  /// The same prefix, for messages built elsewhere.
  std::string where() const;

 private:
  const OnnxNode& node_;
  int64_t opset_;
  std::string file_;
  std::vector<at::Tensor> constants_;
  std::vector<at::Tensor> samples_;
};

/// What a node computes, given its inputs (undefined tensors for inputs left out); returns one
/// tensor per output (an undefined one for an optional output it does not compute).
using OpRun = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;

/// Builds the OpRun of a node, reading its attributes once; refuses (NodeView::refuse) what it
/// does not support.
using OpBuild = OpRun (*)(const NodeView& node);

/// The operators igb imports, by op type (docs/onnx-import.md lists them).
const std::map<std::string, OpBuild>& onnx_op_table();

/// The integers of a 0-D or 1-D integer tensor.
std::vector<int64_t> to_ints(const at::Tensor& t);

/// `axis` in [-rank, rank) as a dimension index; a refusal naming the node otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank, const NodeView& node);

/// The window of a convolution or pool node: kernel, strides, dilations, and its pads, given
/// (`pads`) or derived from the input's sizes (`auto_pad` SAME_UPPER, SAME_LOWER, VALID).
struct Window {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  /// Begins then ends, one pair a spatial dimension.
  std::vector<int64_t> pads;

  /// The pads for spatial input sizes `in` (begins then ends).
  std::vector<int64_t> pads_for(at::IntArrayRef in) const;
  /// Whether `pads` are the same at both ends of every dimension.
  static bool symmetric(const std::vector<int64_t>& pads);
};

/// Reads a node's window attributes for `spatial` dimensions; `kernel` is used where the node
/// gives no kernel_shape (a convolution's weight). Refuses sizes that do not fit.
Window read_window(const NodeView& n, size_t spatial, std::vector<int64_t> kernel);

/// `x` padded by `pads` (begins then ends of its last pads.size() / 2 dimensions) with `value`.
at::Tensor pad_spatial(const at::Tensor& x, const std::vector<int64_t>& pads, double value);

// The op table's parts (onnx_ops_*.cpp).
void add_elementwise_ops(std::map<std::string, OpBuild>& table);
void add_nn_ops(std::map<std::string, OpBuild>& table);
void add_tensor_ops(std::map<std::string, OpBuild>& table);
void add_resize_ops(std::map<std::string, OpBuild>& table);

}  // namespace igb::models::onnx_import
