#include "tools/graph/summary_graph.h"

#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "core/trace_scope.h"

namespace igb::tools {

namespace jit = torch::jit;

std::string shape_to_string(const Shape& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

Shape parse_shape(const std::string& text, const std::string& what) {
  Shape shape;
  std::string cur;
  auto flush = [&] {
    if (cur.empty() || cur.find_first_not_of("0123456789") != std::string::npos || cur.size() > 9)
      throw InputError(what + ": '" + text + "' is not a shape like 1x3x224x224");
    shape.push_back(std::stoll(cur));
    if (shape.back() <= 0) throw InputError(what + ": '" + text + "' has a zero dimension");
    cur.clear();
  };
  for (char c : text) {
    if (c == 'x' || c == 'X' || c == ',') flush();
    else cur += c;
  }
  flush();
  return shape;
}

int64_t volume(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::string OpNode::param(const std::string& suffix) const {
  for (const auto& p : params)
    if (p.size() > suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        p[p.size() - suffix.size() - 1] == '.')
      return p;
  return "";
}

std::string OpNode::attrs() const {
  std::ostringstream s;
  auto dims = [](const Shape& v) { return shape_to_string(v); };
  if (type == "Conv" || type == "ConvTranspose" || type == "MaxPool" || type == "AvgPool") {
    s << "k=" << dims(kernel);
    if (!stride.empty() && volume(stride) != 1) s << " s=" << dims(stride);
    if (!padding.empty() && std::any_of(padding.begin(), padding.end(), [](int64_t p) { return p != 0; }))
      s << " p=" << dims(padding);
    if (!dilation.empty() && volume(dilation) != 1) s << " d=" << dims(dilation);
    if (groups != 1) s << " g=" << groups;
  } else if (type == "AdaptiveAvgPool" || type == "AdaptiveMaxPool" || type == "Upsample") {
    s << "out=" << dims(output_size);
  } else if (type == "Concat" || type == "Softmax" || type == "Slice") {
    s << "dim=" << dim;
  } else if (type == "Flatten") {
    s << "dims=" << dim << ".." << end_dim;
  } else if (type == "PixelShuffle") {
    s << "r=" << factor;
  } else if (type == "Pad") {
    s << "pad=";
    for (size_t i = 0; i < pads.size(); ++i) s << (i ? "," : "") << pads[i];
  }
  return s.str();
}

namespace {

/// aten op → readable type; ops not listed keep their aten name.
std::string op_type(const std::string& kind, bool transposed) {
  static const std::unordered_map<std::string, std::string> types = {
      {"aten::linear", "Linear"},           {"aten::addmm", "Linear"},
      {"aten::matmul", "MatMul"},           {"aten::batch_norm", "BatchNorm"},
      {"aten::instance_norm", "InstanceNorm"}, {"aten::layer_norm", "LayerNorm"},
      {"aten::group_norm", "GroupNorm"},    {"aten::relu", "ReLU"},
      {"aten::relu_", "ReLU"},              {"aten::hardtanh", "ReLU6"},
      {"aten::hardtanh_", "ReLU6"},         {"aten::relu6", "ReLU6"},
      {"aten::prelu", "PReLU"},             {"aten::leaky_relu", "LeakyReLU"},
      {"aten::leaky_relu_", "LeakyReLU"},   {"aten::tanh", "Tanh"},
      {"aten::tanh_", "Tanh"},              {"aten::sigmoid", "Sigmoid"},
      {"aten::sigmoid_", "Sigmoid"},        {"aten::max_pool2d", "MaxPool"},
      {"aten::max_pool1d", "MaxPool"},      {"aten::avg_pool2d", "AvgPool"},
      {"aten::adaptive_avg_pool2d", "AdaptiveAvgPool"}, {"aten::adaptive_max_pool2d", "AdaptiveMaxPool"},
      {"aten::add", "Add"},                 {"aten::add_", "Add"},
      {"aten::sub", "Sub"},                 {"aten::sub_", "Sub"},
      {"aten::mul", "Mul"},                 {"aten::mul_", "Mul"},
      {"aten::div", "Div"},                 {"aten::div_", "Div"},
      {"aten::cat", "Concat"},              {"aten::flatten", "Flatten"},
      {"aten::view", "Reshape"},            {"aten::reshape", "Reshape"},
      {"aten::pixel_shuffle", "PixelShuffle"}, {"aten::constant_pad_nd", "Pad"},
      {"aten::reflection_pad2d", "Pad"},    {"aten::replication_pad2d", "Pad"},
      {"aten::pad", "Pad"},                 {"aten::upsample_bicubic2d", "Upsample"},
      {"aten::upsample_bilinear2d", "Upsample"}, {"aten::upsample_nearest2d", "Upsample"},
      {"aten::slice", "Slice"},             {"aten::dropout", "Dropout"},
      {"aten::dropout_", "Dropout"},        {"aten::feature_dropout", "Dropout"},
      {"aten::clamp", "Clamp"},             {"aten::clamp_", "Clamp"},
      {"aten::mean", "Mean"},               {"aten::softmax", "Softmax"},
      {"aten::log_softmax", "Softmax"},     {"aten::contiguous", "Contiguous"},
      {"aten::clone", "Clone"},             {"aten::to", "Cast"},
  };
  if (kind == "aten::_convolution" || kind == "aten::conv2d" || kind == "aten::conv1d")
    return transposed ? "ConvTranspose" : "Conv";
  if (kind == "aten::conv_transpose2d" || kind == "aten::conv_transpose1d") return "ConvTranspose";
  auto it = types.find(kind);
  if (it != types.end()) return it->second;
  auto pos = kind.find("::");
  return pos == std::string::npos ? kind : kind.substr(pos + 2);
}

/// Ops that keep each channel where it is (elementwise, pooling, spatial resampling).
bool channel_preserving(const std::string& type) {
  static const std::set<std::string> keep = {
      "ReLU", "ReLU6", "LeakyReLU", "Tanh", "Sigmoid", "MaxPool", "AvgPool", "AdaptiveAvgPool",
      "AdaptiveMaxPool", "Add", "Sub", "Mul", "Div", "Dropout", "Clamp", "Upsample", "Contiguous",
      "Clone", "Cast", "abs", "neg", "exp", "sqrt", "hardswish", "silu", "gelu", "elu"};
  return keep.count(type) > 0;
}

/// The constant behind `v` as a list of ints (a prim::Constant list or a ListConstruct of
/// constants), or nothing.
std::optional<std::vector<int64_t>> const_ints(const jit::Value* v) {
  if (auto iv = jit::toIValue(v)) {
    if (iv->isIntList()) return iv->toIntVector();
    if (iv->isInt()) return std::vector<int64_t>{iv->toInt()};
    return std::nullopt;
  }
  if (v->node()->kind() == c10::prim::ListConstruct) {
    std::vector<int64_t> out;
    for (const auto* in : v->node()->inputs()) {
      auto iv = jit::toIValue(in);
      if (!iv || !iv->isInt()) return std::nullopt;
      out.push_back(iv->toInt());
    }
    return out;
  }
  return std::nullopt;
}

int64_t const_int(const jit::Node* n, size_t i, int64_t fallback) {
  if (i >= n->inputs().size()) return fallback;
  auto iv = jit::toIValue(n->input(i));
  return iv && iv->isInt() ? iv->toInt() : fallback;
}

Shape const_shape(const jit::Node* n, size_t i) {
  if (i >= n->inputs().size()) return {};
  return const_ints(n->input(i)).value_or(Shape{});
}

bool const_bool(const jit::Node* n, size_t i) {
  if (i >= n->inputs().size()) return false;
  auto iv = jit::toIValue(n->input(i));
  return iv && iv->isBool() && iv->toBool();
}

bool is_tensor(const jit::Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

std::string first_line(const std::string& s) {
  auto pos = s.find('\n');
  return pos == std::string::npos ? s : s.substr(0, pos);
}

std::string parent_of(const std::string& path) {
  auto pos = path.rfind('.');
  return pos == std::string::npos ? "" : path.substr(0, pos);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// "torch::nn::MaxPool2dImpl" → "MaxPool2d".
std::string class_short_name(const torch::nn::Module& m) {
  std::string n = m.name();
  auto pos = n.rfind("::");
  if (pos != std::string::npos) n = n.substr(pos + 2);
  if (n.size() > 4 && n.compare(n.size() - 4, 4, "Impl") == 0) n.resize(n.size() - 4);
  return n;
}

bool module_matches(const torch::nn::Module& m, const std::string& type) {
  const std::string cls = class_short_name(m);
  if (type == "Pad") return cls.find("Pad") != std::string::npos;
  if (type == "ReLU") return cls == "ReLU" || cls == "Activation";
  return cls.rfind(type, 0) == 0;
}

/// Ties traced constants back to named parameters and buffers by storage and view.
class ParamIndex {
 public:
  explicit ParamIndex(const torch::nn::Module& model) {
    auto add = [&](const std::string& name, const torch::Tensor& t) {
      if (!t.defined() || !t.has_storage()) return;
      entries_.push_back({t.storage().unsafeGetStorageImpl(), t.storage_offset(), t.sizes().vec(), name});
    };
    for (const auto& p : model.named_parameters()) add(p.key(), p.value());
    for (const auto& b : model.named_buffers()) add(b.key(), b.value());
  }
  /// The name of the parameter or buffer `t` is (or is a view of), or "".
  std::string find(const torch::Tensor& t) const {
    if (!t.has_storage()) return "";
    const auto* impl = t.storage().unsafeGetStorageImpl();
    const Entry* same_storage = nullptr;
    for (const auto& e : entries_) {
      if (e.storage != impl) continue;
      if (e.offset == t.storage_offset() && e.sizes == t.sizes().vec()) return e.name;
      if (!same_storage) same_storage = &e;
    }
    return same_storage ? same_storage->name : "";
  }

 private:
  struct Entry {
    const c10::StorageImpl* storage;
    int64_t offset;
    std::vector<int64_t> sizes;
    std::string name;
  };
  std::vector<Entry> entries_;
};

/// "aten::relu_ (layer1.0.relu1)": the last op of a partial trace, for error messages.
std::string last_op(jit::Graph& graph, const ParamIndex& index) {
  const jit::Node* last = nullptr;
  for (const jit::Node* n : graph.nodes())
    if (n->kind().is_aten()) last = n;
  if (!last) return "";
  std::string name;
  for (const auto* in : last->inputs())
    if (in->node()->kind() == c10::prim::Constant && is_tensor(in)) {
      auto p = index.find(jit::toIValue(in)->toTensor());
      if (!p.empty()) {
        name = parent_of(p);
        break;
      }
    }
  if (name.empty()) {
    auto scope = const_cast<jit::Node*>(last)->scope();
    if (scope && !scope->isRoot() && !scope->isBlank()) name = scope->name().toUnqualString();
  }
  return std::string(last->kind().toQualString()) + (name.empty() ? "" : " (" + name + ")");
}

/// Restores gradients flags and training mode when tracing ends, however it ends.
class TraceGuard {
 public:
  explicit TraceGuard(torch::nn::Module& model) : model_(model), training_(model.is_training()) {
    for (auto& p : model.parameters()) {
      saved_.emplace_back(p, p.requires_grad());
      p.set_requires_grad(false);
    }
    model.eval();
  }
  ~TraceGuard() {
    for (auto& [p, flag] : saved_) p.set_requires_grad(flag);
    model_.train(training_);
  }

 private:
  torch::nn::Module& model_;
  bool training_;
  std::vector<std::pair<torch::Tensor, bool>> saved_;
};

}  // namespace

SummaryGraph SummaryGraph::build(torch::nn::Module& model, const Shape& input_shape, const Forward& forward,
                                 const std::string& model_name) {
  if (input_shape.size() < 2) throw InputError(model_name + ": input shape " + shape_to_string(input_shape) + " needs a batch and a channel dimension");
  std::shared_ptr<jit::Graph> graph;
  {
    TraceGuard guard(model);
    TraceNames names(model);
    torch::TensorOptions opts;
    auto params = model.parameters();
    if (!params.empty()) opts = opts.device(params.front().device()).dtype(params.front().dtype());
    auto dummy = torch::full(input_shape, 0.5, opts);
    ParamIndex index(model);
    std::string where;  // the last op recorded before a failure
    auto fail = [&](const std::string& why) {
      return InputError("cannot trace " + model_name + " on input " + shape_to_string(input_shape) + ": " + why +
                        (where.empty() ? "" : " (the trace stopped after " + where + ")"));
    };
    try {
      auto traced = jit::tracer::trace(
          {dummy},
          [&](jit::Stack in) -> jit::Stack {
            const auto state = jit::tracer::getTracingState();
            try {
              return {forward(in.at(0).toTensor())};
            } catch (...) {
              if (state && state->graph) where = last_op(*state->graph, index);
              throw;
            }
          },
          [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false);
      graph = traced.first->graph;
    } catch (const InputError&) {
      throw;
    } catch (const c10::Error& e) {
      throw fail(first_line(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw fail(first_line(e.what()));
    }
  }

  SummaryGraph g;
  g.jit_graph_ = graph;
  g.model_name_ = model_name;
  g.input_shape_ = input_shape;
  ParamIndex params(model);
  std::unordered_map<const jit::Value*, int> value_ids;
  std::unordered_map<const jit::Value*, std::pair<std::string, Shape>> param_alias;

  auto new_value = [&](const jit::Value* v, int producer) {
    DataValue dv;
    dv.id = static_cast<int>(g.values_.size());
    dv.producer = producer;
    if (auto tt = v->type()->cast<c10::TensorType>()) {
      if (auto sizes = tt->sizes().concrete_sizes()) dv.shape = *sizes;
      if (auto st = tt->scalarType()) dv.dtype = c10::toString(*st);
    }
    value_ids[v] = dv.id;
    g.values_.push_back(std::move(dv));
    return g.values_.back().id;
  };
  for (const auto* in : graph->inputs())
    if (is_tensor(in)) g.inputs_.push_back(new_value(in, -1));

  std::vector<std::string> scopes;  // per op: innermost traced module scope, "" when none
  for (jit::Node* node : graph->nodes()) {
    const auto kind = node->kind();
    if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct)
      continue;
    bool tensor_out = std::any_of(node->outputs().begin(), node->outputs().end(), is_tensor);
    if (!tensor_out) continue;
    // A transpose or view of a parameter (linear's weight.t() before addmm) stands for the
    // parameter itself.
    static const std::set<std::string> param_views = {"aten::t", "aten::transpose", "aten::permute", "aten::view",
                                                      "aten::reshape", "aten::contiguous", "aten::detach"};
    if (param_views.count(kind.toQualString()) && node->outputs().size() == 1 && is_tensor(node->input(0))) {
      const auto* src = node->input(0);
      std::string name;
      Shape shape;
      if (auto it = param_alias.find(src); it != param_alias.end()) {
        std::tie(name, shape) = it->second;
      } else if (src->node()->kind() == c10::prim::Constant) {
        auto t = jit::toIValue(src)->toTensor();
        name = params.find(t);
        shape = t.sizes().vec();
      }
      if (!name.empty()) {
        param_alias[node->output()] = {name, shape};
        continue;
      }
    }

    OpNode op;
    op.id = static_cast<int>(g.ops_.size());
    op.kind = kind.toQualString();
    bool transposed = false;
    if (op.kind == "aten::_convolution") transposed = const_bool(node, 6);
    op.type = op_type(op.kind, transposed);

    // Data inputs (tensors from other ops, lists of them) and parameters (constants).
    auto take_input = [&](const jit::Value* v) {
      auto it = value_ids.find(v);
      if (it != value_ids.end()) {
        op.inputs.push_back(it->second);
        return;
      }
      if (auto a = param_alias.find(v); a != param_alias.end()) {
        op.params.push_back(a->second.first);
        op.param_shapes.push_back(a->second.second);
        return;
      }
      if (v->node()->kind() == c10::prim::Constant && is_tensor(v)) {
        auto t = jit::toIValue(v)->toTensor();
        auto name = params.find(t);
        if (!name.empty()) {
          op.params.push_back(name);
          op.param_shapes.push_back(t.sizes().vec());
        }
      }
    };
    for (const auto* in : node->inputs()) {
      if (in->node()->kind() == c10::prim::ListConstruct && in->type()->kind() == c10::TypeKind::ListType &&
          in->type()->containedType(0)->cast<c10::TensorType>()) {
        for (const auto* e : in->node()->inputs()) take_input(e);
      } else if (is_tensor(in)) {
        take_input(in);
      }
    }
    for (const auto* out : node->outputs())
      if (is_tensor(out)) op.outputs.push_back(new_value(out, op.id));
    // addmm reads (bias, input, weight): list the weight first, as every other op does.
    for (size_t i = 1; i < op.params.size(); ++i)
      if (op.param("weight") == op.params[i]) {
        std::rotate(op.params.begin(), op.params.begin() + i, op.params.begin() + i + 1);
        std::rotate(op.param_shapes.begin(), op.param_shapes.begin() + i, op.param_shapes.begin() + i + 1);
      }

    // Attributes.
    if (op.type == "Conv" || op.type == "ConvTranspose") {
      if (op.kind == "aten::_convolution") {
        op.stride = const_shape(node, 3);
        op.padding = const_shape(node, 4);
        op.dilation = const_shape(node, 5);
        op.groups = const_int(node, 8, 1);
      } else if (op.type == "Conv") {
        op.stride = const_shape(node, 3);
        op.padding = const_shape(node, 4);
        op.dilation = const_shape(node, 5);
        op.groups = const_int(node, 6, 1);
      } else {
        op.stride = const_shape(node, 3);
        op.padding = const_shape(node, 4);
        op.groups = const_int(node, 6, 1);
        op.dilation = const_shape(node, 7);
      }
      if (!op.param_shapes.empty()) op.kernel.assign(op.param_shapes[0].begin() + 2, op.param_shapes[0].end());
    } else if (op.type == "MaxPool") {
      op.kernel = const_shape(node, 1);
      op.stride = const_shape(node, 2);
      op.padding = const_shape(node, 3);
      op.dilation = const_shape(node, 4);
    } else if (op.type == "AvgPool") {
      op.kernel = const_shape(node, 1);
      op.stride = const_shape(node, 2);
      op.padding = const_shape(node, 3);
    } else if (op.type == "AdaptiveAvgPool" || op.type == "AdaptiveMaxPool") {
      op.output_size = const_shape(node, 1);
    } else if (op.type == "Upsample") {
      if (!op.outputs.empty()) {
        const auto& s = g.values_[op.outputs[0]].shape;
        if (s.size() > 2) op.output_size.assign(s.begin() + 2, s.end());
      }
    } else if (op.type == "Concat" || op.type == "Softmax") {
      op.dim = const_int(node, 1, 0);
    } else if (op.type == "Slice") {
      op.dim = const_int(node, 1, 0);
    } else if (op.type == "Flatten") {
      op.dim = const_int(node, 1, 0);
      op.end_dim = const_int(node, 2, -1);
    } else if (op.type == "PixelShuffle") {
      op.factor = const_int(node, 1, 1);
    } else if (op.type == "Pad") {
      op.pads = const_shape(node, 1);
    }
    // Normalise negative dims against the input rank.
    if ((op.type == "Concat" || op.type == "Slice" || op.type == "Softmax" || op.type == "Flatten") &&
        op.dim < 0 && !op.inputs.empty())
      op.dim += static_cast<int64_t>(g.values_[op.inputs[0]].shape.size());

    for (int v : op.inputs) g.values_[v].consumers.push_back(op.id);
    const auto scope = node->scope();
    scopes.push_back(scope && !scope->isRoot() && !scope->isBlank() ? scope->name().toUnqualString() : "");
    g.ops_.push_back(std::move(op));
    g.jit_nodes_.push_back(node);
  }
  for (const auto* out : graph->outputs()) {
    if (out->node()->kind() == c10::prim::TupleConstruct || out->node()->kind() == c10::prim::ListConstruct) {
      for (const auto* e : out->node()->inputs())
        if (value_ids.count(e)) g.outputs_.push_back(value_ids[e]);
    } else if (value_ids.count(out)) {
      g.outputs_.push_back(value_ids[out]);
    }
  }

  // Names. Parametric ops: the module owning their parameters. Others: the traced scope when it
  // is a leaf module, else a parameter-free child of the enclosing module of the right class
  // (a pooling or flatten module called directly from a forward), else scope + op type.
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) modules[item.key()] = item.value();
  std::set<std::string> claimed;
  std::map<std::string, int> counts;
  auto unique = [&](const std::string& base) {
    int n = ++counts[base];
    return n == 1 ? base : base + "_" + std::to_string(n);
  };
  auto claim_child = [&](const std::string& parent, const std::string& type) -> std::string {
    const torch::nn::Module* holder = &model;
    if (!parent.empty()) {
      auto it = modules.find(parent);
      if (it == modules.end()) return "";
      holder = it->second.get();
    }
    for (const auto& child : holder->named_children()) {
      std::string path = parent.empty() ? child.key() : parent + "." + child.key();
      const auto& m = *child.value();
      if (claimed.count(path) || !m.children().empty() || !m.parameters().empty() || !module_matches(m, type))
        continue;
      claimed.insert(path);
      return path;
    }
    return "";
  };
  for (auto& op : g.ops_) {
    if (op.parametric()) {
      op.module = parent_of(op.params.front());
      for (const auto& p : op.params)
        if (parent_of(p) != op.module) op.module = "";  // ops mixing modules: name by scope
    }
    if (op.module.empty()) {
      const std::string& scope = scopes[op.id];
      auto it = modules.find(scope);
      if (!scope.empty() && it != modules.end() && it->second->children().empty()) {
        op.module = scope;
      } else {
        // Where to look for a module of the op's own: the scope, else around the producer.
        std::vector<std::string> parents;
        if (!scope.empty()) parents.push_back(scope);
        else if (!op.inputs.empty() && g.values_[op.inputs[0]].producer >= 0) {
          std::string p = parent_of(g.ops_[g.values_[op.inputs[0]].producer].module);
          for (;;) {
            parents.push_back(p);
            if (p.empty()) break;
            p = parent_of(p);
          }
        } else {
          parents.push_back("");
        }
        for (const auto& parent : parents) {
          op.module = claim_child(parent, op.type);
          if (!op.module.empty()) break;
        }
        if (op.module.empty()) {
          op.name = unique(scope.empty() ? lower(op.type) : scope + "." + lower(op.type));
          continue;
        }
      }
    }
    op.name = unique(op.module);
  }
  for (const auto& op : g.ops_) g.by_name_[op.name] = op.id;
  return g;
}

int SummaryGraph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

int SummaryGraph::index(const std::string& name) const {
  int i = find(name);
  if (i >= 0) return i;
  std::vector<std::string> names;
  for (const auto& op : ops_) names.push_back(op.name);
  throw InputError("no op named '" + name + "' in the graph of " + model_name_ + "; closest: " +
                   join(closest_names(name, names)));
}

int64_t SummaryGraph::macs(int index) const {
  const auto& op = ops_.at(index);
  const bool conv = op.type == "Conv" || op.type == "ConvTranspose";
  if ((!conv && op.type != "Linear") || op.inputs.empty() || op.outputs.empty()) return 0;
  const std::string weight = op.param("weight");
  if (weight.empty()) return 0;
  Shape w;
  for (size_t i = 0; i < op.params.size(); ++i)
    if (op.params[i] == weight) w = op.param_shapes[i];
  if (w.size() < 2) return 0;
  // Products per output (or, transposed, per input) element: the weight's dims after the first.
  const int64_t per_element = volume(Shape(w.begin() + 1, w.end()));
  if (op.type == "ConvTranspose") return volume(shape(op.inputs[0])) * per_element;
  if (op.type == "Conv") return volume(shape(op.outputs[0])) * per_element;
  return volume(shape(op.outputs[0])) * w.back();
}

int64_t SummaryGraph::total_macs() const {
  int64_t total = 0;
  for (size_t i = 0; i < ops_.size(); ++i) total += macs(static_cast<int>(i));
  return total;
}

std::vector<int> SummaryGraph::ops_of_module(const std::string& module) const {
  std::vector<int> out;
  for (const auto& op : ops_)
    if (op.module == module) out.push_back(op.id);
  return out;
}

std::vector<int> SummaryGraph::predecessors(int op) const {
  std::vector<int> out;
  for (int v : ops_.at(op).inputs) {
    int p = values_[v].producer;
    if (p >= 0 && std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> SummaryGraph::successors(int op) const {
  std::vector<int> out;
  for (int v : ops_.at(op).outputs)
    for (int c : values_[v].consumers)
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

/// Channel count of `shape` along `dim` (1 when the shape is shorter).
int64_t dim_size(const Shape& shape, int64_t dim) {
  return dim >= 0 && dim < static_cast<int64_t>(shape.size()) ? shape[dim] : 1;
}

/// Pad amount before dimension `dim` of a rank-`rank` tensor in a pad list (last dim first).
int64_t pad_before(const std::vector<int64_t>& pads, int64_t rank, int64_t dim) {
  size_t pair = static_cast<size_t>(rank - 1 - dim);
  return 2 * pair < pads.size() ? pads[2 * pair] : 0;
}

bool pads_channel(const OpNode& op, int64_t rank) {
  size_t pair = static_cast<size_t>(rank - 2);
  return 2 * pair + 1 < op.pads.size() && (op.pads[2 * pair] != 0 || op.pads[2 * pair + 1] != 0);
}

/// Flatten of every dimension from 1 on, or a view to [N, C·H·W].
bool flattens_channels(const OpNode& op, const Shape& in, const Shape& out) {
  if (in.size() < 3 || out.size() != 2 || out[0] != in[0]) return false;
  if (op.type == "Flatten") return op.dim == 1 && (op.end_dim == -1 || op.end_dim == static_cast<int64_t>(in.size()) - 1);
  return op.type == "Reshape";
}

void add_unique(std::vector<Reach>& out, Reach r) {
  for (const auto& e : out)
    if (e.op == r.op && e.slot == r.slot && e.offset == r.offset && e.block == r.block) return;
  out.push_back(std::move(r));
}

}  // namespace

std::vector<Reach> SummaryGraph::parametric_successors(int op) const {
  std::vector<Reach> out;
  std::set<std::tuple<int, int64_t, int64_t>> seen;
  std::function<void(int, int64_t, int64_t, std::vector<int>)> walk = [&](int v, int64_t offset, int64_t block,
                                                                          std::vector<int> via) {
    if (!seen.insert({v, offset, block}).second) return;
    for (int c : values_[v].consumers) {
      const auto& o = ops_[c];
      for (int slot = 0; slot < static_cast<int>(o.inputs.size()); ++slot) {
        if (o.inputs[slot] != v) continue;
        Reach r{c, slot, offset, block, false, via};
        if (o.parametric()) {
          add_unique(out, r);
          continue;
        }
        if (o.outputs.empty()) continue;
        const Shape& in = values_[v].shape;
        const Shape& res = values_[o.outputs[0]].shape;
        auto next = via;
        next.push_back(c);
        const auto rank = static_cast<int64_t>(in.size());
        if (o.type == "Concat") {
          if (o.dim != 1) {
            walk(o.outputs[0], offset, block, next);
            continue;
          }
          int64_t before = 0;
          for (int k = 0; k < slot; ++k) before += dim_size(values_[o.inputs[k]].shape, 1);
          walk(o.outputs[0], offset + before, block, next);
        } else if (o.type == "Pad" && o.kind == "aten::constant_pad_nd") {
          walk(o.outputs[0], offset + (pads_channel(o, rank) ? pad_before(o.pads, rank, 1) : 0), block, next);
        } else if ((o.type == "Flatten" || o.type == "Reshape") && flattens_channels(o, in, res)) {
          const int64_t spatial = volume(Shape(in.begin() + 2, in.end()));
          walk(o.outputs[0], offset * spatial, block * spatial, next);
        } else if ((o.type == "Flatten" && o.dim >= 2) || (o.type == "Reshape" && in == res) ||
                   (o.type == "Slice" && o.dim != 1) || (o.type == "Pad" && !pads_channel(o, rank)) ||
                   (o.type == "Mean" && res.size() > 1 && dim_size(res, 1) == dim_size(in, 1)) ||
                   (o.type == "Softmax" && o.dim != 1) || (channel_preserving(o.type) && dim_size(res, 1) == dim_size(in, 1))) {
          walk(o.outputs[0], offset, block, next);
        } else {
          r.barrier = true;
          add_unique(out, r);
        }
      }
    }
  };
  for (int v : ops_.at(op).outputs) walk(v, 0, 1, {});
  return out;
}

std::vector<Reach> SummaryGraph::parametric_predecessors(int op) const {
  std::vector<Reach> out;
  std::function<void(int, int, int64_t, int64_t, std::vector<int>)> walk = [&](int v, int slot, int64_t offset,
                                                                               int64_t block, std::vector<int> via) {
    int p = values_[v].producer;
    if (p < 0) return;
    const auto& o = ops_[p];
    Reach r{p, slot, offset, block, false, via};
    if (o.parametric()) {
      add_unique(out, r);
      return;
    }
    auto next = via;
    next.push_back(p);
    const Shape& res = values_[v].shape;
    const Shape& in = o.inputs.empty() ? res : values_[o.inputs[0]].shape;
    const auto rank = static_cast<int64_t>(in.size());
    if (o.type == "Concat" && o.dim == 1) {
      int64_t before = 0;
      for (int k : o.inputs) {
        walk(k, slot, offset + before * block, block, next);
        before += dim_size(values_[k].shape, 1);
      }
    } else if (o.type == "Concat") {
      for (int k : o.inputs) walk(k, slot, offset, block, next);
    } else if (o.type == "Pad" && o.kind == "aten::constant_pad_nd") {
      walk(o.inputs[0], slot, offset + (pads_channel(o, rank) ? pad_before(o.pads, rank, 1) * block : 0), block, next);
    } else if ((o.type == "Flatten" || o.type == "Reshape") && flattens_channels(o, in, res) && block == 1) {
      walk(o.inputs[0], slot, offset, volume(Shape(in.begin() + 2, in.end())), next);
    } else if ((o.type == "Flatten" && o.dim >= 2) || (o.type == "Reshape" && in == res) ||
               (o.type == "Slice" && o.dim != 1) || (o.type == "Pad" && !pads_channel(o, rank)) ||
               (o.type == "Mean" && res.size() > 1 && dim_size(res, 1) == dim_size(in, 1)) ||
               (o.type == "Softmax" && o.dim != 1) || (channel_preserving(o.type) && dim_size(res, 1) == dim_size(in, 1))) {
      for (int k : o.inputs)
        if (dim_size(values_[k].shape, 1) == dim_size(res, 1) || values_[k].shape.size() < 2) walk(k, slot, offset, block, next);
    } else {
      r.barrier = true;
      add_unique(out, r);
    }
  };
  const auto& o = ops_.at(op);
  for (int slot = 0; slot < static_cast<int>(o.inputs.size()); ++slot) walk(o.inputs[slot], slot, 0, 1, {});
  return out;
}

}  // namespace igb::tools
