#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/onnx/onnx_file.h"

namespace onnx {
class NodeProto;
}  // namespace onnx

namespace igb::models::onnx_import {

/// One node of an ONNX graph.
struct OnnxNode {
  /// The node in the model (OnnxGraph::file keeps it alive).
  const onnx::NodeProto* proto = nullptr;
  std::string op_type;
  /// The operator set the node's op comes from ("" is ONNX's default domain).
  std::string domain;
  /// The node's name in the file (may be empty).
  std::string name;
  /// Position of the node in the file.
  size_t index = 0;
  /// Names of the values it reads ("" for an optional input left out) and writes.
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;

  /// How messages name the node: "node 'conv1' (Conv)", or "node #3 (Conv)" without a name.
  std::string label() const;
};

/// A graph input the model's caller gives (not an initializer).
struct OnnxInput {
  std::string name;
  /// ONNX element type (TensorProto::DataType).
  int32_t elem_type = 0;
  /// Dimensions; -1 where the file gives a name (`dim_param`) or nothing.
  std::vector<int64_t> dims;
  /// The names of symbolic dimensions ("" for fixed ones, "?" for unnamed unknown ones).
  std::vector<std::string> dim_names;
};

/// An ONNX model's main graph, checked and in an order every node can run in.
struct OnnxGraph {
  OnnxFile file;
  /// Nodes in an order where each node's inputs come before it (the file's order where it is one).
  std::vector<OnnxNode> nodes;
  /// Initializers by name, as tensors, and their names in the file's order.
  std::map<std::string, at::Tensor> initializers;
  std::vector<std::string> initializer_order;
  /// The inputs the caller gives, in the file's order.
  std::vector<OnnxInput> inputs;
  /// Names of the graph's outputs, in order.
  std::vector<std::string> outputs;
};

/// Builds the graph of `file`: reads its initializers and inputs, and orders its nodes; an
/// Identity node reading an initializer becomes an initializer of its own (a copy). One
/// InputError line naming the file and the node for a node reading a name that no node, input or
/// initializer defines, two nodes writing one name, nodes that depend on each other in a cycle,
/// an output nothing writes, an input dimension over kMaxDimension, and an initializer whose data
/// does not fit its dims.
OnnxGraph build_graph(OnnxFile file);

/// read_onnx_file and build_graph in one: the graph of the ONNX model in `path`, shared by what is
/// built from it.
std::shared_ptr<const OnnxGraph> load_onnx_graph(const std::string& path);

}  // namespace igb::models::onnx_import
