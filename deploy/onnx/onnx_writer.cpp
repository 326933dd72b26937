#include "deploy/onnx/onnx_writer.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/jit_containers.h"
#include "core/text.h"

namespace igb::deploy {

namespace jit = torch::jit;

OnnxAttr OnnxAttr::integer(std::string name, int64_t v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}
OnnxAttr OnnxAttr::integers(std::string name, std::vector<int64_t> v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.kind = Kind::kInts;
  a.ints = std::move(v);
  return a;
}
OnnxAttr OnnxAttr::real(std::string name, float v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}
OnnxAttr OnnxAttr::text(std::string name, std::string v) {
  OnnxAttr a;
  a.name = std::move(name);
  a.kind = Kind::kString;
  a.s = std::move(v);
  return a;
}

struct OnnxWriter::Impl {
  onnx::GraphProto graph;
};

namespace {

bool is_tensor_value(const jit::Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

}  // namespace

OnnxWriter::OnnxWriter(torch::nn::Module& model, const SummaryGraph& graph, Dynamic dynamic)
    : graph_(graph), dynamic_(dynamic), impl_(std::make_unique<Impl>()) {
  for (const auto& p : model.named_parameters()) tensors_[p.key()] = p.value();
  for (const auto& b : model.named_buffers()) tensors_[b.key()] = b.value();
  // Summary-graph values by traced value: graph inputs, then each op's tensor outputs in order.
  size_t k = 0;
  for (const auto* in : graph.jit_graph()->inputs())
    if (is_tensor_value(in) && k < graph.inputs().size()) value_of_[in] = graph.inputs()[k++];
  for (const auto& op : graph.ops()) {
    size_t slot = 0;
    for (const auto* out : graph.jit_node(op.id)->outputs())
      if (is_tensor_value(out) && slot < op.outputs.size()) value_of_[out] = op.outputs[slot++];
  }
  for (size_t i = 0; i < graph.inputs().size(); ++i)
    names_[graph.inputs()[i]] = i == 0 ? "input" : "input_" + std::to_string(i);
  for (const auto& op : graph.ops())
    for (size_t slot = 0; slot < op.outputs.size(); ++slot)
      names_[op.outputs[slot]] = slot == 0 ? op.name : op.name + ":" + std::to_string(slot);
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    names_[graph.outputs()[i]] = i == 0 ? "output" : "output_" + std::to_string(i);
    graph_outputs_.insert(graph.outputs()[i]);
  }
  io_inputs_ = graph.inputs();
  io_outputs_ = graph.outputs();
}

void OnnxWriter::set_io(const std::vector<int>& inputs, const std::vector<int>& outputs) {
  io_inputs_ = inputs;
  io_outputs_ = outputs;
  graph_outputs_ = std::set<int>(outputs.begin(), outputs.end());
}

OnnxWriter::~OnnxWriter() = default;

std::string OnnxWriter::unique(const std::string& name) {
  const int n = taken_[name]++;
  return n == 0 ? name : name + "_" + std::to_string(n);
}

std::string OnnxWriter::input(const OpNode& op, size_t slot) const {
  if (slot >= op.inputs.size())
    fail(op, "it has " + std::to_string(op.inputs.size()) + " data inputs, not " +
                 std::to_string(slot + 1));
  if (auto o = input_override_.find({op.id, op.inputs[slot]}); o != input_override_.end())
    return o->second;
  auto it = names_.find(op.inputs[slot]);
  if (it == names_.end()) fail(op, "its input " + std::to_string(slot) + " has no producer");
  return it->second;
}

std::string OnnxWriter::output(const OpNode& op, size_t slot) const {
  if (slot >= op.outputs.size()) fail(op, "it has no output " + std::to_string(slot));
  return names_.at(op.outputs[slot]);
}

std::string OnnxWriter::temp(const OpNode& op, const std::string& what) {
  return unique(op.name + "/" + what);
}

void OnnxWriter::alias(const OpNode& op, size_t slot, size_t input_slot) {
  const std::string from = input(op, input_slot);
  const int out = op.outputs.at(slot);
  if (graph_outputs_.count(out)) {
    // A graph output keeps its own name: copy the value into it.
    node("Identity", op.name, {from}, {names_[out]});
    return;
  }
  names_[out] = from;
}

const Shape& OnnxWriter::input_shape(const OpNode& op, size_t slot) const {
  if (slot >= op.inputs.size()) fail(op, "it has no data input " + std::to_string(slot));
  return graph_.shape(op.inputs[slot]);
}

const Shape& OnnxWriter::output_shape(const OpNode& op, size_t slot) const {
  if (slot >= op.outputs.size()) fail(op, "it has no output " + std::to_string(slot));
  return graph_.shape(op.outputs[slot]);
}

std::string OnnxWriter::tensor(const std::string& name, const at::Tensor& t) {
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : t.sizes()) init->add_dims(d);
  const auto c = t.detach().to(at::kCPU, at::kFloat).contiguous();
  // raw_data is little-endian, as the float32 bytes are on the machines LibTorch runs on.
  init->set_raw_data(std::string(static_cast<const char*>(c.data_ptr()),
                                 static_cast<size_t>(c.numel()) * sizeof(float)));
  return n;
}

std::string OnnxWriter::param(const std::string& name) {
  if (auto a = param_alias_.find(name); a != param_alias_.end()) return a->second;
  for (const auto& init : impl_->graph.initializer())
    if (init.name() == name) return name;
  auto it = tensors_.find(name);
  if (it == tensors_.end() || !it->second.defined())
    throw InputError("cannot export to ONNX: the model has no parameter or buffer '" + name + "'");
  if (!it->second.is_floating_point())
    throw InputError("cannot export to ONNX: parameter '" + name + "' is not floating point");
  return tensor(name, it->second);
}

std::string OnnxWriter::int64s(const std::string& name, const std::vector<int64_t>& v) {
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(onnx::TensorProto::INT64);
  init->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) init->add_int64_data(x);
  return n;
}

std::string OnnxWriter::float_vector(const std::string& name, const std::vector<float>& v) {
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(static_cast<int64_t>(v.size()));
  for (float x : v) init->add_float_data(x);
  return n;
}

std::string OnnxWriter::int8s(const std::string& name, const std::vector<int8_t>& v,
                              const Shape& dims) {
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(onnx::TensorProto::INT8);
  for (int64_t d : dims) init->add_dims(d);
  init->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size()));
  return n;
}

std::string OnnxWriter::integers(const std::string& name, const at::Tensor& t) {
  const auto c = t.detach().to(at::kCPU).contiguous();
  int type = onnx::TensorProto::INT32;
  if (c.scalar_type() == at::kChar)
    type = onnx::TensorProto::INT8;
  else if (c.scalar_type() == at::kByte)
    type = onnx::TensorProto::UINT8;
  else if (c.scalar_type() != at::kInt)
    throw std::logic_error("OnnxWriter::integers: " + name + " is not int8, uint8 or int32");
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(type);
  for (int64_t d : c.sizes()) init->add_dims(d);
  init->set_raw_data(std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
  return n;
}

std::string OnnxWriter::bias(const OpNode& op) {
  if (auto it = bias_.find(op.id); it != bias_.end()) return it->second;
  return op.param("bias").empty() ? std::string() : param(op.param("bias"));
}

at::Tensor OnnxWriter::model_tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? at::Tensor() : it->second;
}

void OnnxWriter::alias_param(const std::string& name, const std::string& value) {
  param_alias_[name] = value;
}

void OnnxWriter::override_input(int op_id, int value, const std::string& name) {
  input_override_[{op_id, value}] = name;
}

std::string OnnxWriter::value_name(int value) const {
  auto it = names_.find(value);
  if (it == names_.end())
    throw InputError("cannot export to ONNX: value " + std::to_string(value) + " has no producer");
  return it->second;
}

std::string OnnxWriter::float_scalar(const std::string& name, float v) {
  const std::string n = unique(name);
  auto* init = impl_->graph.add_initializer();
  init->set_name(n);
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_float_data(v);
  return n;
}

std::string OnnxWriter::operand_value(const OpNode& op, const OnnxOperand& o,
                                      const std::string& what) {
  switch (o.kind) {
    case OnnxOperand::Kind::kValue:
      return o.value;
    case OnnxOperand::Kind::kTensor:
      return o.param.empty() ? tensor(op.name + "." + what, o.tensor) : param(o.param);
    case OnnxOperand::Kind::kNumber:
      return float_scalar(op.name + "." + what, static_cast<float>(o.number));
    case OnnxOperand::Kind::kNone:
      break;
  }
  fail(op, "its " + what + " operand is missing");
}

void OnnxWriter::node(const std::string& type, const std::string& name,
                      const std::vector<std::string>& inputs,
                      const std::vector<std::string>& outputs, const std::vector<OnnxAttr>& attrs) {
  auto* n = impl_->graph.add_node();
  n->set_op_type(type);
  n->set_name(unique(name));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  for (const auto& a : attrs) {
    auto* p = n->add_attribute();
    p->set_name(a.name);
    switch (a.kind) {
      case OnnxAttr::Kind::kInt:
        p->set_type(onnx::AttributeProto::INT);
        p->set_i(a.i);
        break;
      case OnnxAttr::Kind::kInts:
        p->set_type(onnx::AttributeProto::INTS);
        for (int64_t x : a.ints) p->add_ints(x);
        break;
      case OnnxAttr::Kind::kFloat:
        p->set_type(onnx::AttributeProto::FLOAT);
        p->set_f(a.f);
        break;
      case OnnxAttr::Kind::kString:
        p->set_type(onnx::AttributeProto::STRING);
        p->set_s(a.s);
        break;
    }
  }
}

const jit::Value* OnnxWriter::arg(const OpNode& op, const char* name) const {
  const jit::Node* n = graph_.jit_node(op.id);
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (!schema) return nullptr;
  auto i = schema->argumentIndexWithName(name);
  if (!i || static_cast<size_t>(*i) >= n->inputs().size()) return nullptr;
  return n->input(static_cast<size_t>(*i));
}

bool OnnxWriter::has_arg(const OpNode& op, const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return false;
  auto iv = jit::toIValue(v);
  return !iv || !iv->isNone();
}

std::optional<double> OnnxWriter::number_arg(const OpNode& op, const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return std::nullopt;
  auto iv = jit::toIValue(v);
  if (!iv) fail(op, std::string("its argument ") + name + " is not a constant");
  if (iv->isInt()) return static_cast<double>(iv->toInt());
  if (iv->isDouble()) return iv->toDouble();
  if (iv->isBool()) return iv->toBool() ? 1.0 : 0.0;
  return std::nullopt;
}

std::optional<std::vector<int64_t>> OnnxWriter::ints_arg(const OpNode& op, const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return std::nullopt;
  return constant_ints(v);
}

std::optional<std::vector<double>> OnnxWriter::doubles_arg(const OpNode& op,
                                                           const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return std::nullopt;
  return constant_doubles(v);
}

std::optional<bool> OnnxWriter::bool_arg(const OpNode& op, const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return std::nullopt;
  auto iv = jit::toIValue(v);
  if (!iv || !iv->isBool()) return std::nullopt;
  return iv->toBool();
}

std::optional<std::string> OnnxWriter::string_arg(const OpNode& op, const char* name) const {
  const jit::Value* v = arg(op, name);
  if (!v) return std::nullopt;
  auto iv = jit::toIValue(v);
  if (!iv || !iv->isString()) return std::nullopt;
  return iv->toStringRef();
}

OnnxOperand OnnxWriter::operand(const OpNode& op, size_t index) const {
  const jit::Node* n = graph_.jit_node(op.id);
  OnnxOperand o;
  if (index >= n->inputs().size()) return o;
  const jit::Value* v = n->input(index);
  if (auto it = value_of_.find(v); it != value_of_.end()) {
    o.kind = OnnxOperand::Kind::kValue;
    if (auto ov = input_override_.find({op.id, it->second}); ov != input_override_.end()) {
      o.value = ov->second;
      return o;
    }
    auto name = names_.find(it->second);
    if (name == names_.end()) fail(op, "its input " + std::to_string(index) + " has no producer");
    o.value = name->second;
    return o;
  }
  auto iv = jit::toIValue(v);
  if (!iv) fail(op, "its input " + std::to_string(index) + " is computed by an unsupported op");
  if (iv->isNone()) return o;
  if (iv->isTensor()) {
    o.kind = OnnxOperand::Kind::kTensor;
    o.tensor = iv->toTensor();
    for (const auto& [name, t] : tensors_)
      if (t.defined() && t.has_storage() && o.tensor.has_storage() &&
          t.storage().unsafeGetStorageImpl() == o.tensor.storage().unsafeGetStorageImpl() &&
          t.storage_offset() == o.tensor.storage_offset() && t.sizes() == o.tensor.sizes())
        o.param = name;
    return o;
  }
  if (iv->isInt() || iv->isDouble() || iv->isBool()) {
    o.kind = OnnxOperand::Kind::kNumber;
    o.number = iv->isInt()      ? static_cast<double>(iv->toInt())
               : iv->isDouble() ? iv->toDouble()
                                : (iv->toBool() ? 1.0 : 0.0);
    return o;
  }
  fail(op, "its input " + std::to_string(index) + " is neither a tensor nor a number");
}

void OnnxWriter::fail(const OpNode& op, const std::string& why) const {
  throw InputError("cannot export " + op.type + " op '" + op.name + "' to ONNX: " + why);
}

int64_t OnnxWriter::node_count() const { return impl_->graph.node_size(); }
int64_t OnnxWriter::initializer_count() const { return impl_->graph.initializer_size(); }

namespace {

/// Symbolic dims of a graph input or output: N for the batch, H and W for the spatial dims of a
/// 4-D value ("H_out", "W_out" where the traced size differs from the input's).
std::vector<std::string> io_dims(const Shape& shape, const Shape& input, bool batch, bool hw,
                                 bool is_input) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < shape.size(); ++d) {
    std::string s = std::to_string(shape[d]);
    if (d == 0 && batch) s = "N";
    if (hw && shape.size() == 4 && input.size() == 4 && d >= 2) {
      const char* base = d == 2 ? "H" : "W";
      s = is_input || shape[d] == input[d] ? base : std::string(base) + "_out";
    }
    dims.push_back(s);
  }
  return dims;
}

void declare(onnx::ValueInfoProto* vi, const OnnxWriter::Io& io) {
  vi->set_name(io.name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  for (const auto& d : io.dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
      dim->set_dim_value(std::stoll(d));
    else
      dim->set_dim_param(d);
  }
}

/// FLOAT initializers to FLOAT16, Casts at the graph's inputs and outputs (which stay float32).
void to_float16(onnx::GraphProto& g) {
  std::set<std::string> keep;  // Resize's roi and scales are float32 inputs of their own type
  for (const auto& n : g.node())
    if (n.op_type() == "Resize")
      for (int i = 1; i < std::min(n.input_size(), 3); ++i) keep.insert(n.input(i));
  for (auto& init : *g.mutable_initializer()) {
    if (init.data_type() != onnx::TensorProto::FLOAT || keep.count(init.name())) continue;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    at::Tensor t;
    if (init.has_raw_data()) {
      std::vector<float> v(init.raw_data().size() / sizeof(float));
      std::memcpy(v.data(), init.raw_data().data(), v.size() * sizeof(float));
      t = at::tensor(v);
    } else {
      t = at::tensor(std::vector<float>(init.float_data().begin(), init.float_data().end()));
    }
    const auto h = t.to(at::kHalf).contiguous();
    init.clear_float_data();
    init.set_data_type(onnx::TensorProto::FLOAT16);
    init.set_raw_data(
        std::string(static_cast<const char*>(h.data_ptr()), static_cast<size_t>(h.numel()) * 2));
  }
  for (auto& n : *g.mutable_node())
    if (n.op_type() == "Cast")
      for (auto& a : *n.mutable_attribute())
        if (a.name() == "to" && a.i() == onnx::TensorProto::FLOAT)
          a.set_i(onnx::TensorProto::FLOAT16);
  auto rename = [&](const std::string& from, const std::string& to, bool outputs) {
    for (auto& n : *g.mutable_node()) {
      for (auto& i : *n.mutable_input())
        if (i == from) i = to;
      if (outputs)
        for (auto& o : *n.mutable_output())
          if (o == from) o = to;
    }
  };
  auto cast = [](const std::string& in, const std::string& out, int to) {
    onnx::NodeProto c;
    c.set_op_type("Cast");
    c.set_name(out + "/cast");
    c.add_input(in);
    c.add_output(out);
    auto* a = c.add_attribute();
    a->set_name("to");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(to);
    return c;
  };
  std::vector<onnx::NodeProto> head, tail;
  for (const auto& in : g.input()) {
    rename(in.name(), in.name() + "/fp16", false);
    head.push_back(cast(in.name(), in.name() + "/fp16", onnx::TensorProto::FLOAT16));
  }
  for (const auto& out : g.output()) {
    rename(out.name(), out.name() + "/fp16", true);
    tail.push_back(cast(out.name() + "/fp16", out.name(), onnx::TensorProto::FLOAT));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (auto& n : head) *nodes.Add() = n;
  for (const auto& n : g.node()) *nodes.Add() = n;
  for (auto& n : tail) *nodes.Add() = n;
  g.mutable_node()->Swap(&nodes);
}

}  // namespace

std::string OnnxWriter::finish(int64_t opset, const std::string& producer,
                               const std::string& version) {
  auto& g = impl_->graph;
  g.set_name(graph_.model_name());
  const Shape& in0 = graph_.inputs().empty() ? Shape{} : graph_.shape(graph_.inputs()[0]);
  inputs_.clear();
  outputs_.clear();
  for (int v : io_inputs_)
    inputs_.push_back({names_.at(v), io_dims(graph_.shape(v), in0, dynamic_.batch, dynamic_.hw,
                                             /*is_input=*/true)});
  for (int v : io_outputs_) {
    if (graph_.values().at(v).producer < 0)
      throw InputError("cannot export " + graph_.model_name() +
                       " to ONNX: an input is returned unchanged as an output");
    outputs_.push_back(
        {names_.at(v), io_dims(graph_.shape(v), in0, dynamic_.batch, dynamic_.hw, false)});
  }
  g.clear_input();
  g.clear_output();
  for (const auto& io : inputs_) declare(g.add_input(), io);
  for (const auto& io : outputs_) declare(g.add_output(), io);
  if (fp16_) to_float16(g);

  onnx::ModelProto model;
  model.set_ir_version(7);
  model.set_producer_name(producer);
  model.set_producer_version(version);
  auto* op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  *model.mutable_graph() = g;
  try {
    onnx::checker::check_model(model);
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1,
                                        /*data_prop=*/false);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw InputError("the ONNX model of " + graph_.model_name() +
                     " fails the ONNX checker: " + first_line(e.what()));
  }
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    throw InputError("cannot serialize the ONNX model of " + graph_.model_name());
  return bytes;
}

}  // namespace igb::deploy
