#include "models/onnx/onnx_ops.h"

#include <onnx/onnx_pb.h>

#include <utility>

#include "core/error.h"
#include "models/onnx/onnx_tensor.h"

namespace igb::models::onnx_import {

namespace {

const onnx::AttributeProto* find_attr(const OnnxNode& node, const std::string& name) {
  for (const auto& a : node.proto->attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

}  // namespace

NodeView::NodeView(const OnnxNode& node, int64_t opset, std::string file,
                   std::vector<at::Tensor> constants, std::vector<at::Tensor> samples)
    : node_(node),
      opset_(opset),
      file_(std::move(file)),
      constants_(std::move(constants)),
      samples_(std::move(samples)) {
  constants_.resize(node.inputs.size());
  samples_.resize(node.inputs.size());
}

bool NodeView::has(const std::string& attr) const { return find_attr(node_, attr) != nullptr; }

int64_t NodeView::i(const std::string& attr, int64_t fallback) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT) refuse("attribute '" + attr + "' is not an int");
  return a->i();
}

float NodeView::f(const std::string& attr, float fallback) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return fallback;
  if (a->type() == onnx::AttributeProto::INT) return static_cast<float>(a->i());
  if (a->type() != onnx::AttributeProto::FLOAT) refuse("attribute '" + attr + "' is not a float");
  return a->f();
}

std::string NodeView::s(const std::string& attr, const std::string& fallback) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) refuse("attribute '" + attr + "' is not a string");
  return a->s();
}

std::vector<int64_t> NodeView::ints(const std::string& attr) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return {};
  if (a->type() != onnx::AttributeProto::INTS) refuse("attribute '" + attr + "' is not ints");
  return {a->ints().begin(), a->ints().end()};
}

std::vector<float> NodeView::floats(const std::string& attr) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return {};
  if (a->type() != onnx::AttributeProto::FLOATS) refuse("attribute '" + attr + "' is not floats");
  return {a->floats().begin(), a->floats().end()};
}

at::Tensor NodeView::tensor(const std::string& attr) const {
  const auto* a = find_attr(node_, attr);
  if (!a) return {};
  if (a->type() != onnx::AttributeProto::TENSOR) refuse("attribute '" + attr + "' is not a tensor");
  return tensor_from_proto(a->t(), where() + ": attribute '" + attr + "'");
}

const at::Tensor& NodeView::constant(size_t i) const {
  static const at::Tensor kNone;
  return i < constants_.size() ? constants_[i] : kNone;
}

const at::Tensor& NodeView::sample(size_t i) const {
  static const at::Tensor kNone;
  return i < samples_.size() ? samples_[i] : kNone;
}

std::string NodeView::where() const {
  const std::string label = node_.label();
  return file_ + ": " + label.substr(0, label.size() - 1) + ", opset " + std::to_string(opset_) +
         ")";
}

void NodeView::refuse(const std::string& why) const { throw InputError(where() + ": " + why); }

std::vector<int64_t> to_ints(const at::Tensor& t) {
  if (!t.defined()) return {};
  const auto flat = t.to(at::kLong).contiguous().reshape({-1});
  const auto* p = flat.data_ptr<int64_t>();
  return {p, p + flat.numel()};
}

int64_t normalize_axis(int64_t axis, int64_t rank, const NodeView& node) {
  if (axis < -rank || axis >= rank)
    node.refuse("axis " + std::to_string(axis) + " is out of range for a " + std::to_string(rank) +
                "-D input");
  return axis < 0 ? axis + rank : axis;
}

const std::map<std::string, OpBuild>& onnx_op_table() {
  static const std::map<std::string, OpBuild> table = [] {
    std::map<std::string, OpBuild> t;
    add_elementwise_ops(t);
    add_nn_ops(t);
    add_tensor_ops(t);
    add_resize_ops(t);
    return t;
  }();
  return table;
}

}  // namespace igb::models::onnx_import
