#pragma once

#include <ATen/core/stack.h>
#include <torch/nn/module.h>

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/op_table.h"

namespace torch::jit {
struct Graph;
struct Node;
}  // namespace torch::jit

namespace igb::graph {

using Shape = std::vector<int64_t>;

/// "1x3x32x32".
std::string shape_to_string(const Shape& shape);
/// Parses "1x3x32x32" (also "1,3,32,32"); throws InputError naming `what` on bad text.
Shape parse_shape(const std::string& text, const std::string& what);
int64_t volume(const Shape& shape);

/// One operation of the traced forward pass, tied to the module and parameters it uses.
struct OpNode {
  int id = -1;
  /// Unique, stable name: the module path for module ops ("layer1.0.conv1"); for parameter-free
  /// ops without a module of their own, the enclosing module plus the op ("layer1.0.add").
  std::string name;
  /// Readable op type from the op table (Conv, ConvTranspose, Linear, BatchNorm, ReLU, Add,
  /// Concat, PixelShuffle, ...); for an operator the table does not know, its aten name.
  std::string type;
  /// The traced operator ("aten::_convolution").
  std::string kind;
  /// The op's row in the op table (graph/op_table.h); every rule reads it, not `type`.
  OpKind op_kind = OpKind::kOther;
  /// Dotted path of the module the op belongs to ("" when none is known).
  std::string module;
  /// Named parameters and buffers the op reads ("layer1.0.conv1.weight"), in argument order.
  std::vector<std::string> params;
  /// Shapes of those parameters, parallel to `params`.
  std::vector<Shape> param_shapes;
  /// Data values read and written (ids into SummaryGraph::values()), in argument order.
  std::vector<int> inputs;
  std::vector<int> outputs;

  /// Convolutions and pooling: kernel, stride, padding, dilation; convolutions: groups.
  Shape kernel, stride, padding, dilation;
  int64_t groups = 1;
  /// Adaptive pooling and upsampling: the output's spatial size.
  Shape output_size;
  /// Concat, flatten, slice, softmax: the dimension; pad: the pad list; pixel shuffle: factor.
  int64_t dim = 0;
  std::vector<int64_t> pads;
  int64_t factor = 0;
  /// Flatten's end dimension (-1 = last).
  int64_t end_dim = -1;
  /// Clamp's bounds (±infinity when absent).
  double clamp_min = -std::numeric_limits<double>::infinity();
  double clamp_max = std::numeric_limits<double>::infinity();
  /// Fake quantization: the scale (0 when it varies per channel or is not a constant), zero
  /// point and integer range; `dim` holds the channel axis of a per-channel one.
  double scale = 0;
  int64_t zero_point = 0;
  int64_t quant_min = 0;
  int64_t quant_max = 0;
  /// Bits of the weight a quantizer gave the op's module (its `<module>.weight_bits` buffer); 0
  /// when the weight is floating point.
  int64_t weight_bits = 0;

  bool parametric() const { return !params.empty(); }
  /// The named parameter ending in `suffix` ("weight"), or "" when the op has none.
  std::string param(const std::string& suffix) const;
  /// "k=3x3 s=2 p=1 g=32" style summary of the attributes that matter for the type.
  std::string attrs() const;
};

/// A tensor flowing between ops.
struct DataValue {
  int id = -1;
  Shape shape;
  std::string dtype;
  /// Producing op, or -1 for a graph input.
  int producer = -1;
  /// Consuming ops (an op appears once per input slot that reads this value).
  std::vector<int> consumers;
};

/// Where the channels of one op land in the input of another op reached through
/// parameter-free ops: channel c of the source covers input features
/// [offset + c·block, offset + (c+1)·block) of `op`'s input `slot` (block > 1 after a flatten).
/// `barrier` marks a parameter-free op that mixes channels in a way the walk does not follow
/// (pixel shuffle, a channel slice, an unknown op); the walk stops there and reports it.
struct Reach {
  int op = -1;
  int slot = 0;
  int64_t offset = 0;
  int64_t block = 1;
  bool barrier = false;
  /// Parameter-free ops crossed on the way (Add, Concat, ReLU, ...), in order.
  std::vector<int> via;
};

/// The data-flow graph of one traced forward pass: what MACs, drawing, profiling and thinning
/// read. Built with torch::jit::tracer on a dummy input of the model's own input shape, with the
/// model in eval mode and gradients off for the duration (both restored after).
///
///   auto g = SummaryGraph::build(*model, {1, 3, 32, 32}, [&](auto& x) { return model->forward(x);
///   }); for (const auto& r : g.parametric_successors(g.index("layer1.0.bn2"))) ...
class SummaryGraph {
 public:
  using Forward = std::function<torch::Tensor(const torch::Tensor&)>;

  /// Traces `forward(zeros-like dummy input)` of `model`. A model that cannot be traced throws
  /// InputError naming the op and the tracer's reason.
  static SummaryGraph build(torch::nn::Module& model, const Shape& input_shape,
                            const Forward& forward, const std::string& model_name = "model");

  const std::string& model_name() const { return model_name_; }
  const Shape& input_shape() const { return input_shape_; }
  const std::vector<OpNode>& ops() const { return ops_; }
  const std::vector<DataValue>& values() const { return values_; }
  /// Graph inputs and outputs (value ids).
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }

  /// Index of the op named `name`, or -1.
  int find(const std::string& name) const;
  /// Index of the op named `name`; throws InputError listing the closest names when unknown.
  int index(const std::string& name) const;
  const OpNode& op(int index) const { return ops_.at(index); }
  const OpNode& op(const std::string& name) const { return ops_.at(index(name)); }
  /// Ops using a parameter of module `module` (for a conv: just the conv), in trace order.
  std::vector<int> ops_of_module(const std::string& module) const;

  /// Ops producing `op`'s inputs / consuming its outputs (each once, in trace order).
  std::vector<int> predecessors(int op) const;
  std::vector<int> successors(int op) const;
  /// The nearest parametric ops after `op` along every path through parameter-free ones (adds,
  /// concats, activations, pooling, flatten), with where `op`'s channels land in their input.
  std::vector<Reach> parametric_successors(int op) const;
  /// The nearest parametric ops before `op`; a Reach tells where the producer's channels sit in
  /// the input of `op` (the concat offset).
  std::vector<Reach> parametric_predecessors(int op) const;

  /// Where channel c of input `slot` of `op` lands in its output (the op table's channel rule,
  /// graph/op_table.h, applied to this op's shapes).
  ChannelLink link(int op, int slot) const;
  /// Shapes of `op`'s data inputs.
  std::vector<Shape> input_shapes(int op) const;

  /// Multiply-accumulates of op `op` for the traced input (convention of torchvision, Distiller
  /// and fvcore): conv Cout·Hout·Wout·(Cin/groups)·kh·kw, transposed conv Cin·(Cout/groups)·kh·kw
  /// per input pixel, linear in·out per output row; 0 for every other op.
  int64_t macs(int op) const;
  /// Sum over all ops.
  int64_t total_macs() const;

  /// Shape of value `v`.
  const Shape& shape(int v) const { return values_.at(v).shape; }

  /// The traced TorchScript graph, and the node of each op, for running ops one by one
  /// (profiling). The graph's constants share storage with the model's parameters.
  const std::shared_ptr<torch::jit::Graph>& jit_graph() const { return jit_graph_; }
  torch::jit::Node* jit_node(int op) const { return jit_nodes_.at(op); }

 private:
  friend class GraphBuilder;
  std::shared_ptr<torch::jit::Graph> jit_graph_;
  std::vector<torch::jit::Node*> jit_nodes_;
  std::string model_name_;
  Shape input_shape_;
  std::vector<OpNode> ops_;
  std::vector<DataValue> values_;
  std::vector<int> inputs_, outputs_;
  std::map<std::string, int> by_name_;
};

/// Runs one node of a traced graph (SummaryGraph::jit_graph()) on `stack`, which holds its inputs
/// in order, leaving its outputs there; list and tuple constructors included (profiling and
/// calibration replay the trace node by node).
void run_traced_node(torch::jit::Node* node, torch::jit::Stack& stack);

/// Called by replay_trace with each data value as it is computed, by summary-graph value id; what
/// it leaves in `tensor` is what later nodes read.
using TraceVisitor = std::function<void(int value, at::Tensor& tensor)>;

/// Replays `graph`'s trace on `input` node by node (under the caller's grad mode) and returns its
/// first output (a tensor, or a tuple's first tensor). `visit` sees the input, then each op's data
/// outputs right after the op runs: calibration reads ranges this way, check_qdq_layers feeds
/// another runtime's values back into the pass.
at::Tensor replay_trace(const SummaryGraph& graph, const at::Tensor& input,
                        const TraceVisitor& visit);

}  // namespace igb::graph
