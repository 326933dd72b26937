#include "graph/summary_graph.h"

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
#include "core/jit_containers.h"
#include "core/text.h"
#include "core/trace_scope.h"
#include "core/train_mode_guard.h"

namespace igb::graph {

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
    if (c == 'x' || c == 'X' || c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return shape;
}

int64_t volume(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
}

std::string OpNode::param(const std::string& suffix) const {
  for (const auto& p : params)
    if (p == suffix) return p;  // a parameter of the root module ("weight")
  for (const auto& p : params)
    if (p.size() > suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        p[p.size() - suffix.size() - 1] == '.')
      return p;
  return "";
}

std::string OpNode::attrs() const { return format_attrs(*this); }

namespace {

const jit::Value* argument(const jit::Node* n, const char* name) {
  return schema_argument(n, name);
}

bool is_tensor_constant(const jit::Value* v) {
  if (v->node()->kind() != c10::prim::Constant) return false;
  auto iv = jit::toIValue(v);
  return iv && iv->isTensor() && iv->toTensor().defined();
}

std::optional<double> const_number(const jit::Value* v) { return constant_number(v); }

/// A constant number, or a constant tensor whose elements all hold one value (a per-tensor
/// scale passed as a tensor, the zero points of a per-channel fake quantization).
std::optional<double> const_uniform(const jit::Value* v) {
  if (auto n = const_number(v)) return n;
  if (!v || !is_tensor_constant(v)) return std::nullopt;
  const auto t = jit::toIValue(v)->toTensor();
  if (t.numel() == 0) return std::nullopt;
  const auto flat = t.detach().to(torch::kCPU, torch::kDouble).reshape({-1});
  const double first = flat[0].item<double>();
  if (!flat.eq(first).all().item<bool>()) return std::nullopt;
  return first;
}

bool const_bool(const jit::Value* v) {
  if (!v) return false;
  auto iv = jit::toIValue(v);
  return iv && iv->isBool() && iv->toBool();
}

bool is_tensor(const jit::Value* v) { return v->type()->cast<c10::TensorType>() != nullptr; }

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

/// Ties traced constants back to named parameters and buffers by storage and view.
class ParamIndex {
 public:
  explicit ParamIndex(const torch::nn::Module& model) {
    auto add = [&](const std::string& name, const torch::Tensor& t) {
      if (!t.defined() || !t.has_storage()) return;
      entries_.push_back(
          {t.storage().unsafeGetStorageImpl(), t.storage_offset(), t.sizes().vec(), name});
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

/// Turns gradients off for the trace and restores them (and, through TrainModeGuard, the
/// training mode) when tracing ends, however it ends.
class TraceGuard {
 public:
  explicit TraceGuard(torch::nn::Module& model) : eval_(model, /*train=*/false), frozen_(model) {}

 private:
  TrainModeGuard eval_;
  FrozenParameters frozen_;
};

}  // namespace

/// Builds a SummaryGraph in named steps: trace, read the values and ops of the trace, then
/// name the ops after their modules.
class GraphBuilder {
 public:
  GraphBuilder(torch::nn::Module& model, const Shape& input_shape, const std::string& model_name)
      : model_(model), params_(model) {
    g_.model_name_ = model_name;
    g_.input_shape_ = input_shape;
  }

  /// Traces `forward` on a dummy input with gradients off and the model in eval mode.
  void trace(const SummaryGraph::Forward& forward) {
    const auto& input_shape = g_.input_shape_;
    const auto& model_name = g_.model_name_;
    TraceGuard guard(model_);
    TraceNames names(model_);
    torch::TensorOptions opts;
    auto params = model_.parameters();
    if (!params.empty()) opts = opts.device(params.front().device()).dtype(params.front().dtype());
    auto dummy = torch::full(input_shape, 0.5, opts);
    std::string where;  // the last op recorded before a failure
    auto fail = [&](const std::string& why) {
      return InputError("cannot trace " + model_name + " on input " + shape_to_string(input_shape) +
                        ": " + why +
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
              if (state && state->graph) where = last_op(*state->graph, params_);
              throw;
            }
          },
          [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false);
      g_.jit_graph_ = traced.first->graph;
    } catch (const InputError&) {
      throw;
    } catch (const c10::Error& e) {
      throw fail(first_line(e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw fail(first_line(e.what()));
    }
  }

  /// One OpNode per traced operator with a tensor output; graph inputs and outputs.
  void read_ops() {
    const auto& graph = g_.jit_graph_;
    for (const auto* in : graph->inputs())
      if (is_tensor(in)) g_.inputs_.push_back(new_value(in, -1));
    for (jit::Node* node : graph->nodes()) {
      const auto kind = node->kind();
      if (kind == c10::prim::Constant || kind == c10::prim::ListConstruct ||
          kind == c10::prim::TupleConstruct)
        continue;
      if (!std::any_of(node->outputs().begin(), node->outputs().end(), is_tensor)) continue;
      if (alias_parameter_view(node)) continue;
      add_op(node);
    }
    for (const auto* out : graph->outputs()) {
      if (out->node()->kind() == c10::prim::TupleConstruct ||
          out->node()->kind() == c10::prim::ListConstruct) {
        for (const auto* e : out->node()->inputs())
          if (value_ids_.count(e)) g_.outputs_.push_back(value_ids_[e]);
      } else if (value_ids_.count(out)) {
        g_.outputs_.push_back(value_ids_[out]);
      }
    }
  }

  /// Parametric ops: the module owning their parameters. Others: the traced scope when it is a
  /// leaf module, else a parameter-free child of the enclosing module that implements the op (a
  /// pooling or flatten module called directly from a forward), else scope + op type.
  void name_ops() {
    for (const auto& item : model_.named_modules("", /*include_self=*/false))
      modules_[item.key()] = item.value();
    for (auto& op : g_.ops_) {
      if (op.parametric()) {
        op.module = parent_of(op.params.front());
        for (const auto& p : op.params)
          if (parent_of(p) != op.module) op.module = "";  // ops mixing modules: name by scope
      }
      if (op.module.empty()) op.module = module_of_parameter_free(op);
      if (op.module.empty()) {
        const std::string& scope = scopes_[op.id];
        op.name = unique(scope.empty() ? lower(op.type) : scope + "." + lower(op.type));
      } else {
        op.name = unique(op.module);
      }
    }
    for (const auto& op : g_.ops_) g_.by_name_[op.name] = op.id;
  }

  /// Weight bits of quantized layers, from the `<module>.weight_bits` buffer a quantizer
  /// registers (compress/quant_modules.h); read by name, so the graph needs nothing of compress/.
  void read_weight_bits() {
    std::map<std::string, at::Tensor> bits;
    for (const auto& b : model_.named_buffers())
      if (b.key().size() > 12 && b.key().compare(b.key().size() - 12, 12, ".weight_bits") == 0)
        bits[b.key()] = b.value();
    if (bits.empty()) return;
    for (auto& op : g_.ops_) {
      if (op.module.empty() || op.param("weight").empty()) continue;
      auto it = bits.find(op.module + ".weight_bits");
      if (it != bits.end() && it->second.numel() == 1) op.weight_bits = it->second.item<int64_t>();
    }
  }

  SummaryGraph take() { return std::move(g_); }

 private:
  int new_value(const jit::Value* v, int producer) {
    DataValue dv;
    dv.id = static_cast<int>(g_.values_.size());
    dv.producer = producer;
    if (auto tt = v->type()->cast<c10::TensorType>()) {
      if (auto sizes = tt->sizes().concrete_sizes()) dv.shape = *sizes;
      if (auto st = tt->scalarType()) dv.dtype = c10::toString(*st);
    }
    value_ids_[v] = dv.id;
    g_.values_.push_back(std::move(dv));
    return g_.values_.back().id;
  }

  /// A transpose or view of a parameter (linear's weight.t() before addmm) stands for the
  /// parameter itself.
  bool alias_parameter_view(const jit::Node* node) {
    if (!is_parameter_view(node->kind().toQualString()) || node->outputs().size() != 1 ||
        node->inputs().empty() || !is_tensor(node->input(0)))
      return false;
    const auto* src = node->input(0);
    std::string name;
    Shape shape;
    if (auto it = param_alias_.find(src); it != param_alias_.end()) {
      std::tie(name, shape) = it->second;
    } else if (src->node()->kind() == c10::prim::Constant) {
      auto t = jit::toIValue(src)->toTensor();
      name = params_.find(t);
      shape = t.sizes().vec();
    }
    if (name.empty()) return false;
    param_alias_[node->output()] = {name, shape};
    return true;
  }

  /// Data inputs (tensors from other ops, lists of them) and parameters (constants).
  void take_input(OpNode& op, const jit::Value* v) {
    auto it = value_ids_.find(v);
    if (it != value_ids_.end()) {
      op.inputs.push_back(it->second);
      return;
    }
    if (auto a = param_alias_.find(v); a != param_alias_.end()) {
      op.params.push_back(a->second.first);
      op.param_shapes.push_back(a->second.second);
      return;
    }
    if (v->node()->kind() == c10::prim::Constant && is_tensor(v)) {
      auto t = jit::toIValue(v)->toTensor();
      auto name = params_.find(t);
      if (!name.empty()) {
        op.params.push_back(name);
        op.param_shapes.push_back(t.sizes().vec());
      }
    }
  }

  void add_op(jit::Node* node) {
    OpNode op;
    op.id = static_cast<int>(g_.ops_.size());
    op.kind = node->kind().toQualString();
    op.op_kind = op_kind_of(op.kind, const_bool(argument(node, "transposed")));
    op.type = op_type_name(op.op_kind, op.kind);
    for (const auto* in : node->inputs()) {
      if (in->node()->kind() == c10::prim::ListConstruct &&
          in->type()->kind() == c10::TypeKind::ListType &&
          in->type()->containedType(0)->cast<c10::TensorType>()) {
        for (const auto* e : in->node()->inputs()) take_input(op, e);
      } else if (is_tensor(in)) {
        take_input(op, in);
      }
    }
    // The scale and zero-point tensors of a fake quantization are not weights: the op stays
    // parameter-free, so channel walks cross it as they cross the activation it replaces.
    if (op.op_kind == OpKind::kFakeQuantize) {
      op.params.clear();
      op.param_shapes.clear();
    }
    for (const auto* out : node->outputs())
      if (is_tensor(out)) op.outputs.push_back(new_value(out, op.id));
    // addmm reads (bias, input, weight): list the weight first, as every other op does.
    for (size_t i = 1; i < op.params.size(); ++i)
      if (op.param("weight") == op.params[i]) {
        std::rotate(op.params.begin(), op.params.begin() + i, op.params.begin() + i + 1);
        std::rotate(op.param_shapes.begin(), op.param_shapes.begin() + i,
                    op.param_shapes.begin() + i + 1);
      }
    decode_attributes(node, op);
    for (int v : op.inputs) g_.values_[v].consumers.push_back(op.id);
    const auto scope = node->scope();
    scopes_.push_back(
        scope && !scope->isRoot() && !scope->isBlank() ? scope->name().toUnqualString() : "");
    g_.ops_.push_back(std::move(op));
    g_.jit_nodes_.push_back(node);
  }

  /// Attributes by the operator schema's argument names, as the op table lists them.
  void decode_attributes(const jit::Node* node, OpNode& op) {
    for (const auto& [name, attr] : op_info(op.op_kind).attrs) {
      const jit::Value* v = argument(node, name);
      if (!v) continue;
      auto ints = [&] { return constant_ints(v).value_or(Shape{}); };
      switch (attr) {
        case OpAttr::kStride:
          op.stride = ints();
          break;
        case OpAttr::kPadding:
          op.padding = ints();
          break;
        case OpAttr::kDilation:
          op.dilation = ints();
          break;
        case OpAttr::kKernel:
          op.kernel = ints();
          break;
        case OpAttr::kOutputSize:
          op.output_size = ints();
          break;
        case OpAttr::kPads:
          op.pads = ints();
          break;
        case OpAttr::kGroups:
          op.groups = static_cast<int64_t>(const_number(v).value_or(1));
          break;
        case OpAttr::kDim:
          op.dim = static_cast<int64_t>(const_number(v).value_or(0));
          break;
        case OpAttr::kEndDim:
          op.end_dim = static_cast<int64_t>(const_number(v).value_or(-1));
          break;
        case OpAttr::kFactor:
          op.factor = static_cast<int64_t>(const_number(v).value_or(1));
          break;
        case OpAttr::kMin:
          op.clamp_min = const_number(v).value_or(op.clamp_min);
          break;
        case OpAttr::kMax:
          op.clamp_max = const_number(v).value_or(op.clamp_max);
          break;
        case OpAttr::kScale:
          op.scale = const_uniform(v).value_or(0);
          break;
        case OpAttr::kZeroPoint:
          op.zero_point = static_cast<int64_t>(const_uniform(v).value_or(0));
          break;
        case OpAttr::kQuantMin:
          op.quant_min = static_cast<int64_t>(const_number(v).value_or(0));
          break;
        case OpAttr::kQuantMax:
          op.quant_max = static_cast<int64_t>(const_number(v).value_or(0));
          break;
        case OpAttr::kAxis:
          op.dim = static_cast<int64_t>(const_number(v).value_or(0));
          break;
      }
    }
    // Convolutions: the kernel is the weight's spatial shape. Upsampling: the output's size.
    if (op_info(op.op_kind).macs != MacRule::kNone && op.op_kind != OpKind::kLinear &&
        !op.param_shapes.empty())
      op.kernel.assign(op.param_shapes[0].begin() + 2, op.param_shapes[0].end());
    if (op.op_kind == OpKind::kUpsample && !op.outputs.empty()) {
      const auto& s = g_.values_[op.outputs[0]].shape;
      if (s.size() > 2) op.output_size.assign(s.begin() + 2, s.end());
    }
    // Negative dims count from the input's rank.
    if (op.dim < 0 && !op.inputs.empty())
      op.dim += static_cast<int64_t>(g_.values_[op.inputs[0]].shape.size());
  }

  std::string unique(const std::string& base) {
    int n = ++counts_[base];
    return n == 1 ? base : base + "_" + std::to_string(n);
  }

  /// A parameter-free child of `parent` that implements the op and is not yet claimed.
  std::string claim_child(const std::string& parent, OpKind kind) {
    const torch::nn::Module* holder = &model_;
    if (!parent.empty()) {
      auto it = modules_.find(parent);
      if (it == modules_.end()) return "";
      holder = it->second.get();
    }
    for (const auto& child : holder->named_children()) {
      std::string path = parent.empty() ? child.key() : parent + "." + child.key();
      const auto& m = *child.value();
      if (claimed_.count(path) || !m.children().empty() || !m.parameters().empty() ||
          !module_implements(class_short_name(m), kind))
        continue;
      claimed_.insert(path);
      return path;
    }
    return "";
  }

  /// A module with no children, or whose only child is an early exit's head ("branch_net", which
  /// does not run while the graph is traced): its op is named after it.
  static bool traced_leaf(const torch::nn::Module& m) {
    for (const auto& c : m.named_children())
      if (c.key() != "branch_net") return false;
    return true;
  }

  std::string module_of_parameter_free(const OpNode& op) {
    const std::string& scope = scopes_[op.id];
    auto it = modules_.find(scope);
    if (!scope.empty() && it != modules_.end() && traced_leaf(*it->second)) return scope;
    // Where to look for a module of the op's own: the scope, else around the producer.
    std::vector<std::string> parents;
    if (!scope.empty()) {
      parents.push_back(scope);
    } else if (!op.inputs.empty() && g_.values_[op.inputs[0]].producer >= 0) {
      for (std::string p = parent_of(g_.ops_[g_.values_[op.inputs[0]].producer].module);;
           p = parent_of(p)) {
        parents.push_back(p);
        if (p.empty()) break;
      }
    } else {
      parents.push_back("");
    }
    for (const auto& parent : parents)
      if (auto m = claim_child(parent, op.op_kind); !m.empty()) return m;
    return "";
  }

  torch::nn::Module& model_;
  ParamIndex params_;
  SummaryGraph g_;
  std::unordered_map<const jit::Value*, int> value_ids_;
  std::unordered_map<const jit::Value*, std::pair<std::string, Shape>> param_alias_;
  std::vector<std::string> scopes_;  // per op: innermost traced module scope, "" when none
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules_;
  std::set<std::string> claimed_;
  std::map<std::string, int> counts_;
};

SummaryGraph SummaryGraph::build(torch::nn::Module& model, const Shape& input_shape,
                                 const Forward& forward, const std::string& model_name) {
  if (input_shape.size() < 2)
    throw InputError(model_name + ": input shape " + shape_to_string(input_shape) +
                     " needs a batch and a channel dimension");
  GraphBuilder builder(model, input_shape, model_name);
  builder.trace(forward);
  builder.read_ops();
  builder.name_ops();
  builder.read_weight_bits();
  return builder.take();
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
  throw InputError("no op named '" + name + "' in the graph of " + model_name_ +
                   "; closest: " + join(closest_names(name, names)));
}

int64_t SummaryGraph::macs(int index) const {
  const auto& op = ops_.at(index);
  const MacRule rule = op_info(op.op_kind).macs;
  if (rule == MacRule::kNone || op.inputs.empty() || op.outputs.empty()) return 0;
  const std::string weight = op.param("weight");
  if (weight.empty()) return 0;
  Shape w;
  for (size_t i = 0; i < op.params.size(); ++i)
    if (op.params[i] == weight) w = op.param_shapes[i];
  if (w.size() < 2) return 0;
  // Products per output (or, transposed, per input) element: the weight's dims after the first.
  const int64_t per_element = volume(Shape(w.begin() + 1, w.end()));
  switch (rule) {
    case MacRule::kPerInputElement:
      return volume(shape(op.inputs[0])) * per_element;
    case MacRule::kPerOutputElement:
      return volume(shape(op.outputs[0])) * per_element;
    case MacRule::kLinear:
      return volume(shape(op.outputs[0])) * w.back();
    case MacRule::kNone:
      break;
  }
  return 0;
}

int64_t SummaryGraph::total_macs() const {
  int64_t total = 0;
  for (size_t i = 0; i < ops_.size(); ++i) total += macs(static_cast<int>(i));
  return total;
}

}  // namespace igb::graph
