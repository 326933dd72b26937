#include "models/onnx/onnx_graph.h"

#include <onnx/onnx_pb.h>

#include <set>

#include "core/error.h"
#include "models/onnx/onnx_tensor.h"

namespace igb::models::onnx_import {

std::string OnnxNode::label() const {
  return (name.empty() ? "node #" + std::to_string(index) : "node '" + name + "'") + " (" +
         op_type + ")";
}

namespace {

OnnxInput read_input(const onnx::ValueInfoProto& v, const std::string& file) {
  OnnxInput in;
  in.name = v.name();
  const std::string what = file + ": input '" + v.name() + "'";
  if (!v.type().has_tensor_type())
    throw InputError(what + " is not a tensor (igb models take tensors)");
  const auto& t = v.type().tensor_type();
  in.elem_type = t.elem_type();
  for (const auto& d : t.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0 || d.dim_value() > kMaxDimension)
        throw InputError(what + ": dimension " + std::to_string(d.dim_value()) +
                         " is out of range [0, 2^31)");
      in.dims.push_back(d.dim_value());
      in.dim_names.emplace_back();
    } else {
      in.dims.push_back(-1);
      in.dim_names.push_back(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
    }
  }
  return in;
}

/// Orders the nodes so that every node comes after the nodes it reads (Kahn's algorithm, taking
/// the earliest ready node in the file each time, so a sorted file keeps its order).
std::vector<OnnxNode> order_nodes(std::vector<OnnxNode> nodes, const std::set<std::string>& given,
                                  const std::string& file) {
  std::map<std::string, size_t> writer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& out : nodes[i].outputs) {
      if (out.empty()) continue;
      if (given.count(out))
        throw InputError(file + ": " + nodes[i].label() + " writes '" + out +
                         "', which is already a graph input or initializer");
      if (!writer.emplace(out, i).second)
        throw InputError(file + ": " + nodes[writer[out]].label() + " and " + nodes[i].label() +
                         " both write '" + out + "'");
    }
  std::vector<std::vector<size_t>> readers(nodes.size());
  std::vector<size_t> waiting(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    for (const auto& in : nodes[i].inputs) {
      if (in.empty() || given.count(in)) continue;
      const auto w = writer.find(in);
      if (w == writer.end())
        throw InputError(file + ": " + nodes[i].label() + " reads '" + in +
                         "', which no node, graph input or initializer defines");
      deps.insert(w->second);
    }
    waiting[i] = deps.size();
    for (size_t d : deps) readers[d].push_back(i);
  }
  std::set<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (waiting[i] == 0) ready.insert(i);
  std::vector<size_t> order;
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t r : readers[i])
      if (--waiting[r] == 0) ready.insert(r);
  }
  if (order.size() != nodes.size()) {
    std::vector<std::string> stuck;
    for (size_t i = 0; i < nodes.size() && stuck.size() < 4; ++i)
      if (waiting[i] != 0) stuck.push_back(nodes[i].label());
    throw InputError(file + ": its nodes form a cycle (" + join(stuck) +
                     (nodes.size() - order.size() > stuck.size() ? ", ..." : "") +
                     " each wait for another)");
  }
  std::vector<OnnxNode> out;
  out.reserve(nodes.size());
  for (size_t i : order) out.push_back(std::move(nodes[i]));
  return out;
}

}  // namespace

OnnxGraph build_graph(OnnxFile file) {
  OnnxGraph g;
  g.file = std::move(file);
  const auto& proto = g.file.model->graph();
  const std::string& path = g.file.path;
  std::set<std::string> given;
  for (const auto& t : proto.initializer()) {
    if (g.initializers.count(t.name()))
      throw InputError(path + ": two initializers are named '" + t.name() + "'");
    g.initializers[t.name()] = tensor_from_proto(t, path + ": initializer '" + t.name() + "'");
    g.initializer_order.push_back(t.name());
    given.insert(t.name());
  }
  if (proto.sparse_initializer_size() > 0)
    throw InputError(path + ": sparse initializers are not supported");
  for (const auto& v : proto.input()) {
    // Before IR version 4 initializers are listed as inputs too; they are not the caller's.
    if (g.initializers.count(v.name())) continue;
    g.inputs.push_back(read_input(v, path));
    given.insert(v.name());
  }
  std::vector<OnnxNode> nodes;
  for (int i = 0; i < proto.node_size(); ++i) {
    const auto& n = proto.node(i);
    OnnxNode node;
    node.proto = &n;
    node.op_type = n.op_type();
    node.domain = n.domain() == "ai.onnx" ? "" : n.domain();
    node.name = n.name();
    node.index = static_cast<size_t>(i);
    node.inputs.assign(n.input().begin(), n.input().end());
    node.outputs.assign(n.output().begin(), n.output().end());
    nodes.push_back(std::move(node));
  }
  // PyTorch's exporter shares initializers of equal values (two PReLUs' first slopes, batch norms'
  // ones and zeros) through Identity nodes; each reader is a layer of its own, so each Identity of
  // an initializer becomes an initializer of its own.
  std::vector<OnnxNode> kept;
  for (auto& n : nodes) {
    const bool copy = n.op_type == "Identity" && n.domain.empty() && n.inputs.size() == 1 &&
                      n.outputs.size() == 1 && g.initializers.count(n.inputs[0]) &&
                      !given.count(n.outputs[0]) && !n.outputs[0].empty();
    if (!copy) {
      kept.push_back(std::move(n));
      continue;
    }
    g.initializers[n.outputs[0]] = g.initializers[n.inputs[0]].clone();
    g.initializer_order.push_back(n.outputs[0]);
    given.insert(n.outputs[0]);
  }
  g.nodes = order_nodes(std::move(kept), given, path);
  std::set<std::string> defined = given;
  for (const auto& n : g.nodes) defined.insert(n.outputs.begin(), n.outputs.end());
  for (const auto& o : proto.output()) {
    if (!defined.count(o.name()))
      throw InputError(path + ": graph output '" + o.name() + "' is written by no node");
    g.outputs.push_back(o.name());
  }
  if (g.outputs.empty()) throw InputError(path + ": the graph has no outputs");
  return g;
}

std::shared_ptr<const OnnxGraph> load_onnx_graph(const std::string& path) {
  auto graph = std::make_shared<OnnxGraph>(build_graph(read_onnx_file(path)));
  return graph;
}

}  // namespace igb::models::onnx_import
