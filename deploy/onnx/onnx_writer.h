#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "deploy/onnx/graph_names.h"

namespace torch::jit {
struct Value;
}  // namespace torch::jit

namespace igb::deploy {

/// One ONNX node attribute: an int, a list of ints, a float or a string.
struct OnnxAttr {
  enum class Kind : uint8_t { kInt, kInts, kFloat, kString };
  std::string name;
  Kind kind = Kind::kInt;
  int64_t i = 0;
  std::vector<int64_t> ints;
  float f = 0;
  std::string s;

  static OnnxAttr integer(std::string name, int64_t v);
  static OnnxAttr integers(std::string name, std::vector<int64_t> v);
  static OnnxAttr real(std::string name, float v);
  static OnnxAttr text(std::string name, std::string v);
};

/// An operand of a traced op: a data value of the graph, a constant tensor (a parameter or a
/// traced constant), a constant number, or none (an omitted optional argument).
struct OnnxOperand {
  enum class Kind : uint8_t { kValue, kTensor, kNumber, kNone };
  Kind kind = Kind::kNone;
  /// kValue: the ONNX value name.
  std::string value;
  /// kTensor: the tensor and, when it is a parameter or buffer of the model, its name.
  at::Tensor tensor;
  std::string param;
  /// kNumber.
  double number = 0;
};

/// The ONNX graph under construction for one summary graph: value names, initializers and nodes.
/// The emitters of deploy/onnx/onnx_ops.h read the op's facts from OpNode and, where the summary
/// graph keeps no field for an argument (BN eps, slopes, slice bounds), from the traced node
/// through the argument accessors below. onnx headers stay inside the .cpp files.
///
///   OnnxWriter w(model, graph, {true, false});
///   for (const auto& op : graph.ops()) op_info(op.op_kind).onnx_emit(w, op);
class OnnxWriter {
 public:
  struct Dynamic {
    bool batch = false;
    bool hw = false;
  };
  OnnxWriter(torch::nn::Module& model, const SummaryGraph& graph, Dynamic dynamic);
  ~OnnxWriter();
  OnnxWriter(const OnnxWriter&) = delete;
  OnnxWriter& operator=(const OnnxWriter&) = delete;

  const SummaryGraph& graph() const { return graph_; }
  const Dynamic& dynamic() const { return dynamic_; }

  // Values.
  /// The ONNX name of data input `slot` of `op`.
  std::string input(const OpNode& op, size_t slot = 0) const;
  /// The ONNX name of output `slot` of `op` (its op name, or the graph output's name).
  std::string output(const OpNode& op, size_t slot = 0) const;
  /// A fresh name for an intermediate value of `op` ("layer1.0.act/sigmoid").
  std::string temp(const OpNode& op, const std::string& what);
  /// Output `slot` of `op` is its data input `input_slot` (a pass-through op writes no node).
  void alias(const OpNode& op, size_t slot, size_t input_slot);
  const Shape& input_shape(const OpNode& op, size_t slot = 0) const;
  const Shape& output_shape(const OpNode& op, size_t slot = 0) const;

  // Initializers.
  /// The model's parameter or buffer `name` as an initializer of the same name.
  std::string param(const std::string& name);
  /// A float32 tensor as initializer `name` (the name is made unique when taken).
  std::string tensor(const std::string& name, const at::Tensor& t);
  std::string int64s(const std::string& name, const std::vector<int64_t>& v);
  std::string float_scalar(const std::string& name, float v);
  std::string float_vector(const std::string& name, const std::vector<float>& v);
  /// An int8 initializer of shape `dims` (a scalar when empty): Q/DQ zero points.
  std::string int8s(const std::string& name, const std::vector<int8_t>& v, const Shape& dims);
  /// An int8, uint8 or int32 tensor as initializer `name` (Q/DQ weights, zero points, biases).
  std::string integers(const std::string& name, const at::Tensor& t);
  /// The bias input of layer `op_id` when the model's layer has no bias parameter (a bias the
  /// export computes: a BatchNorm folded into the layer).
  void set_bias(int op_id, const std::string& value) { bias_[op_id] = value; }
  /// The bias set_bias gave `op`, else its bias parameter, else "" (none).
  std::string bias(const OpNode& op);
  /// The model's parameter or buffer `name`; undefined when it has none.
  at::Tensor model_tensor(const std::string& name) const;
  /// From now on param(`name`) returns `value` (a weight's DequantizeLinear output).
  void alias_param(const std::string& name, const std::string& value);
  /// Data value `value` (a summary-graph value id) reads as `name` for op `op_id` only, through
  /// input() and operand() (an input's DequantizeLinear output).
  void override_input(int op_id, int value, const std::string& name);
  /// The ONNX name of summary-graph value `value`.
  std::string value_name(int value) const;
  /// Write the graph's computation in float16: initializers (except Resize's roi and scales)
  /// become FLOAT16, a Cast follows each graph input and precedes each graph output, which stay
  /// float32. Applied by finish().
  void set_fp16(bool fp16) { fp16_ = fp16; }
  /// An operand as an ONNX value: a data value's name, or an initializer for a constant.
  std::string operand_value(const OpNode& op, const OnnxOperand& o, const std::string& what);

  // Nodes.
  void node(const std::string& type, const std::string& name,
            const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
            const std::vector<OnnxAttr>& attrs = {});

  // Arguments of the traced node, by schema argument name.
  /// A constant int or float argument; nullopt when absent or None.
  std::optional<double> number_arg(const OpNode& op, const char* name) const;
  std::optional<std::vector<int64_t>> ints_arg(const OpNode& op, const char* name) const;
  std::optional<std::vector<double>> doubles_arg(const OpNode& op, const char* name) const;
  std::optional<bool> bool_arg(const OpNode& op, const char* name) const;
  std::optional<std::string> string_arg(const OpNode& op, const char* name) const;
  /// Whether the argument is present and not None.
  bool has_arg(const OpNode& op, const char* name) const;
  /// Input `index` of the traced node as an operand.
  OnnxOperand operand(const OpNode& op, size_t index) const;
  /// The traced node's operator name ("aten::log_softmax").
  std::string aten(const OpNode& op) const { return op.kind; }

  /// InputError "cannot export <type> op '<name>' to ONNX: <why>".
  [[noreturn]] void fail(const OpNode& op, const std::string& why) const;

  // The model.
  /// A graph input or output: name and dims, a symbolic dim as its name ("N").
  struct Io {
    std::string name;
    std::vector<std::string> dims;
  };
  /// Declares the graph's inputs and outputs, checks the model (onnx::checker and strict shape
  /// inference) and returns it serialized: IR 7, the given opset and producer. Throws InputError
  /// with the checker's message.
  std::string finish(int64_t opset, const std::string& producer, const std::string& version);
  /// Declare these summary-graph values as the graph's inputs and outputs instead of the model's
  /// (one stage of a partitioned model); an output a pass-through op makes keeps its own name.
  void set_io(const std::vector<int>& inputs, const std::vector<int>& outputs);
  const std::vector<Io>& inputs() const { return inputs_; }
  const std::vector<Io>& outputs() const { return outputs_; }
  int64_t node_count() const;
  int64_t initializer_count() const;

 private:
  const torch::jit::Value* arg(const OpNode& op, const char* name) const;
  std::string unique(const std::string& name);

  const SummaryGraph& graph_;
  Dynamic dynamic_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<Io> inputs_, outputs_;
  std::unordered_map<const torch::jit::Value*, int> value_of_;
  std::map<int, std::string> bias_;
  std::map<int, std::string> names_;
  std::set<int> graph_outputs_;
  std::vector<int> io_inputs_, io_outputs_;
  std::map<std::string, at::Tensor> tensors_;
  std::map<std::string, int> taken_;
  std::map<std::string, std::string> param_alias_;
  std::map<std::pair<int, int>, std::string> input_override_;
  bool fp16_ = false;
};

}  // namespace igb::deploy
