#include "models/torchscript/script_body.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <unordered_map>

#include "core/activation.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/jit_containers.h"
#include "core/trace_scope.h"

namespace igb::models {

namespace jit = torch::jit;

/// One mirrored module that runs its own TorchScript code: the module, its prepared methods (a
/// copy of each graph with the script functions it calls inlined) and the operator of every
/// node the interpreter hands to TorchScript's registry.
struct ScriptProgram {
  jit::Module module;
  /// Dotted path in the model ("" for the root); `where` is how messages name it.
  std::string name;
  std::string where;
  std::map<std::string, std::shared_ptr<jit::Graph>> methods;
  /// Per method: one more than the largest Value::unique() of its graph (a call's value slots).
  std::map<std::string, size_t> slots;
  std::unordered_map<const jit::Node*, jit::Operation> ops;
  /// The value of every prim::Constant node, converted once.
  std::unordered_map<const jit::Node*, c10::IValue> constants;
  /// prim::GetAttr nodes that read a child of the module itself, resolved once (modules are
  /// never replaced: thinning and quantization change them in place).
  std::unordered_map<const jit::Node*, torch::nn::Module*> children;
};

struct ScriptContext {
  std::string file;
  std::unordered_map<const torch::nn::Module*, std::shared_ptr<ScriptProgram>> programs;
};

torch::jit::Module load_torchscript(const std::string& file) {
  if (!std::filesystem::is_regular_file(file))
    throw InputError("TorchScript model " + file + ": no such file");
  try {
    return jit::load(file, torch::kCPU);
  } catch (const std::exception& e) {
    throw InputError("TorchScript model " + file +
                     ": not a TorchScript archive (save it with torch.jit.script(model).save() or "
                     "torch.jit.trace(model, x).save())" +
                     library_error_detail(e));
  }
}

namespace {

/// "torch.nn.modules.conv.Conv2d" for "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d".
std::string type_name(const jit::Module& m) {
  std::string name = m.type()->name() ? m.type()->name()->qualifiedName() : "";
  static const std::regex mangle("___torch_mangle_[0-9]+\\.");
  name = std::regex_replace(name, mangle, "");
  const std::string prefix = "__torch__.";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  return name;
}

std::string module_where(const std::string& file, const std::string& name) {
  return file + ": module " + (name.empty() ? "(root)" : "'" + name + "'");
}

std::string kind_name(const jit::Node* node) { return node->kind().toQualString(); }

// --- Leaf modules: torch.nn types igb rebuilds natively -------------------------------------

/// The leaf's forward with every call inlined and constants folded: one operator carries the
/// hyperparameters (traced files hold them as constants, scripted files as class constants).
std::shared_ptr<jit::Graph> flat_forward(const jit::Module& m) {
  auto g = m.get_method("forward").graph()->copy();
  jit::Inline(*g);
  jit::ConstantPropagation(g);
  return g;
}

void collect_nodes(jit::Block* block, std::vector<jit::Node*>& out) {
  for (auto* n : block->nodes()) {
    out.push_back(n);
    for (auto* b : n->blocks()) collect_nodes(b, out);
  }
}

/// The one node of `g` whose kind is among `kinds`, or nullptr when there is none or several.
jit::Node* single_op(jit::Graph& g, const std::vector<std::string>& kinds) {
  std::vector<jit::Node*> nodes;
  collect_nodes(g.block(), nodes);
  jit::Node* found = nullptr;
  for (auto* n : nodes) {
    if (std::find(kinds.begin(), kinds.end(), kind_name(n)) == kinds.end()) continue;
    if (found) return nullptr;
    found = n;
  }
  return found;
}

std::optional<c10::IValue> constant(const jit::Node* node, const std::string& input) {
  return jit::toIValue(node->namedInput(input));
}

std::optional<std::vector<int64_t>> constant_ints(const jit::Node* node, const std::string& input) {
  auto v = constant(node, input);
  if (!v || !v->isIntList()) return std::nullopt;
  return v->toIntVector();
}

std::optional<double> constant_double(const jit::Node* node, const std::string& input) {
  auto v = constant(node, input);
  if (!v || !(v->isDouble() || v->isInt())) return std::nullopt;
  return v->isDouble() ? v->to<double>() : static_cast<double>(v->toInt());
}

at::Tensor tensor_attr(const jit::Module& m, const std::string& name) {
  if (!m.hasattr(name)) return {};
  auto v = m.attr(name);
  return v.isTensor() ? v.toTensor() : at::Tensor();
}

/// Points `slot` (a native module's parameter or buffer) at the file's tensor, sharing storage.
void share(at::Tensor& slot, const at::Tensor& value) {
  if (!slot.defined() || !value.defined()) return;
  torch::NoGradGuard no_grad;
  slot.set_data(value.detach());
}

/// What a convolution's operator and tensors say, for shared_conv.
struct ConvArgs {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups;
  at::Tensor weight, bias;
};

/// A Conv2d or ConvTranspose2d of `options` completed by `a`, holding the file's tensors.
template <class Conv, class Options>
std::shared_ptr<torch::nn::Module> shared_conv(Options options, const ConvArgs& a) {
  Conv conv(options.stride(a.stride)
                .padding(a.padding)
                .dilation(a.dilation)
                .groups(a.groups)
                .bias(a.bias.defined()));
  share(conv->weight, a.weight);
  share(conv->bias, a.bias);
  return conv.ptr();
}

std::shared_ptr<torch::nn::Module> make_conv(const jit::Module& m) {
  auto g = flat_forward(m);
  auto* op = single_op(*g, {"aten::_convolution", "aten::conv2d", "aten::conv_transpose2d"});
  if (!op) return nullptr;
  const auto weight = tensor_attr(m, "weight");
  const auto bias = tensor_attr(m, "bias");
  auto stride = constant_ints(op, "stride");
  auto padding = constant_ints(op, "padding");
  auto dilation = constant_ints(op, "dilation");
  auto groups = constant(op, "groups");
  if (!weight.defined() || weight.dim() != 4 || !stride || !padding || !dilation || !groups ||
      !groups->isInt())
    return nullptr;
  const int64_t g_count = groups->toInt();
  bool transposed = kind_name(op) == "aten::conv_transpose2d";
  if (kind_name(op) == "aten::_convolution") {
    auto t = constant(op, "transposed");
    if (!t || !t->isBool()) return nullptr;
    transposed = t->toBool();
  }
  const std::vector<int64_t> kernel{weight.size(2), weight.size(3)};
  const ConvArgs args{*stride, *padding, *dilation, g_count, weight, bias};
  if (!transposed)
    return shared_conv<torch::nn::Conv2d>(
        torch::nn::Conv2dOptions(weight.size(1) * g_count, weight.size(0), kernel), args);
  auto output_padding = constant_ints(op, "output_padding");
  if (!output_padding) return nullptr;
  return shared_conv<torch::nn::ConvTranspose2d>(
      torch::nn::ConvTranspose2dOptions(weight.size(0), weight.size(1) * g_count, kernel)
          .output_padding(*output_padding),
      args);
}

std::shared_ptr<torch::nn::Module> make_linear(const jit::Module& m) {
  auto g = flat_forward(m);
  if (!single_op(*g, {"aten::linear"})) return nullptr;
  const auto weight = tensor_attr(m, "weight");
  const auto bias = tensor_attr(m, "bias");
  if (!weight.defined() || weight.dim() != 2) return nullptr;
  torch::nn::Linear linear(
      torch::nn::LinearOptions(weight.size(1), weight.size(0)).bias(bias.defined()));
  share(linear->weight, weight);
  share(linear->bias, bias);
  return linear.ptr();
}

template <class Norm, class Options>
std::shared_ptr<torch::nn::Module> make_norm(const jit::Module& m) {
  auto g = flat_forward(m);
  auto* op = single_op(*g, {"aten::batch_norm"});
  if (!op) return nullptr;
  const auto weight = tensor_attr(m, "weight");
  const auto mean = tensor_attr(m, "running_mean");
  const auto eps = constant_double(op, "eps");
  if (!eps || !(weight.defined() || mean.defined())) return nullptr;
  // Momentum only moves the running statistics in training; scripted files fold it from the
  // class constant, traced ones record it.
  double momentum = constant_double(op, "momentum").value_or(0.1);
  if (m.type()->hasConstant("momentum") && m.type()->getConstant("momentum").isDouble())
    momentum = m.type()->getConstant("momentum").to<double>();
  const int64_t features = weight.defined() ? weight.size(0) : mean.size(0);
  Norm norm(Options(features)
                .eps(*eps)
                .momentum(momentum)
                .affine(weight.defined())
                .track_running_stats(mean.defined()));
  share(norm->weight, weight);
  share(norm->bias, tensor_attr(m, "bias"));
  share(norm->running_mean, mean);
  share(norm->running_var, tensor_attr(m, "running_var"));
  share(norm->num_batches_tracked, tensor_attr(m, "num_batches_tracked"));
  return norm.ptr();
}

std::shared_ptr<torch::nn::Module> make_activation(const jit::Module& m) {
  auto g = flat_forward(m);
  auto* op = single_op(
      *g, {"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_", "aten::leaky_relu",
           "aten::leaky_relu_", "aten::prelu", "aten::tanh", "aten::sigmoid"});
  if (!op) return nullptr;
  const std::string kind = kind_name(op);
  const bool inplace = kind.back() == '_';
  if (kind == "aten::relu" || kind == "aten::relu_")
    return Activation(ActivationOptions(ActivationKind::kReLU).inplace(inplace)).ptr();
  if (kind == "aten::tanh") return Activation(ActivationKind::kTanh).ptr();
  if (kind == "aten::sigmoid") return Activation(ActivationKind::kSigmoid).ptr();
  if (kind.rfind("aten::hardtanh", 0) == 0) {
    if (constant_double(op, "min_val") != 0.0 || constant_double(op, "max_val") != 6.0)
      return nullptr;
    return Activation(ActivationOptions(ActivationKind::kReLU6).inplace(inplace)).ptr();
  }
  if (kind.rfind("aten::leaky_relu", 0) == 0) {
    auto slope = constant_double(op, "negative_slope");
    if (!slope) return nullptr;
    return Activation(ActivationOptions(ActivationKind::kLeakyReLU)
                          .negative_slope(*slope)
                          .inplace(inplace))
        .ptr();
  }
  const auto weight = tensor_attr(m, "weight");
  if (!weight.defined()) return nullptr;
  Activation prelu(ActivationOptions(ActivationKind::kPReLU).num_parameters(weight.numel()));
  share(prelu->weight, weight);
  return prelu.ptr();
}

/// The native module for a torch.nn leaf, or nullptr when `m` is not one igb rebuilds (or its
/// forward is not the plain operator of its type, e.g. a Conv2d with padding_mode "reflect"):
/// such a module runs as a ScriptedBlock.
std::shared_ptr<torch::nn::Module> make_leaf(const jit::Module& m) {
  if (m.named_children().size() != 0) return nullptr;
  const std::string type = type_name(m);
  static const std::map<std::string, std::shared_ptr<torch::nn::Module> (*)(const jit::Module&)>
      builders{
          {"torch.nn.modules.conv.Conv2d", make_conv},
          {"torch.nn.modules.conv.ConvTranspose2d", make_conv},
          {"torch.nn.modules.linear.Linear", make_linear},
          {"torch.nn.modules.batchnorm.BatchNorm2d",
           make_norm<torch::nn::BatchNorm2d, torch::nn::BatchNorm2dOptions>},
          {"torch.nn.modules.batchnorm.BatchNorm1d",
           make_norm<torch::nn::BatchNorm1d, torch::nn::BatchNorm1dOptions>},
          {"torch.nn.modules.activation.ReLU", make_activation},
          {"torch.nn.modules.activation.ReLU6", make_activation},
          {"torch.nn.modules.activation.LeakyReLU", make_activation},
          {"torch.nn.modules.activation.PReLU", make_activation},
          {"torch.nn.modules.activation.Tanh", make_activation},
          {"torch.nn.modules.activation.Sigmoid", make_activation},
      };
  auto it = builders.find(type);
  return it == builders.end() ? nullptr : it->second(m);
}

// --- Preparing a module's TorchScript methods ----------------------------------------------

/// Inlines every prim::CallFunction (script functions such as torch.nn.functional's), so the
/// interpreter meets only operators, module method calls and control flow.
void inline_functions(jit::Graph& g, const std::string& where) {
  for (bool changed = true; changed;) {
    changed = false;
    std::vector<jit::Node*> nodes;
    collect_nodes(g.block(), nodes);
    for (auto* n : nodes) {
      if (n->kind() != c10::prim::CallFunction) continue;
      auto type = n->input(0)->type()->cast<c10::FunctionType>();
      auto* fn = type ? jit::tryToGraphFunction(*type->function()) : nullptr;
      if (!fn) throw InputError(where + ": calls a function that is not TorchScript code");
      n->removeInput(0);  // the function itself; the callee takes the arguments after it
      jit::inlineCallTo(n, fn);
      changed = true;
      break;  // the node list changed
    }
  }
}

bool interpreted(c10::Symbol kind) {
  return kind == c10::prim::ListConstruct || kind == c10::prim::TupleConstruct ||
         kind == c10::prim::ListUnpack || kind == c10::prim::TupleUnpack ||
         kind == c10::prim::Constant || kind == c10::prim::GetAttr ||
         kind == c10::prim::CallMethod || kind == c10::prim::If || kind == c10::prim::Loop;
}

void prepare_method(ScriptProgram& p, const std::string& method);

void prepare_nodes(ScriptProgram& p, const jit::Graph& g, jit::Block* block) {
  for (auto* n : block->nodes()) {
    for (auto* b : n->blocks()) prepare_nodes(p, g, b);
    if (n->kind() == c10::prim::SetAttr)
      throw InputError(p.where + ": its forward assigns attribute '" + n->s(c10::attr::name) +
                       "'; igb runs forwards that only read their module's attributes");
    if (n->kind() == c10::prim::CallMethod && n->input(0) == g.inputs()[0])
      prepare_method(p, n->s(c10::attr::name));  // a method of the module itself
    if (n->kind() == c10::prim::Constant &&
        n->output()->type()->kind() != c10::TypeKind::FunctionType)
      p.constants.emplace(n, *jit::toIValue(n->output()));
    if (interpreted(n->kind())) continue;
    try {
      p.ops.emplace(n, n->getOperation());
    } catch (const std::exception& e) {
      throw InputError(p.where + ": op " + kind_name(n) +
                       " has no implementation in this build of LibTorch" +
                       library_error_detail(e));
    }
  }
}

void prepare_method(ScriptProgram& p, const std::string& method) {
  if (p.methods.count(method)) return;
  auto fn = p.module.find_method(method);
  if (!fn) throw InputError(p.where + ": has no method '" + method + "'");
  auto g = fn->graph()->copy();
  inline_functions(*g, p.where);
  p.methods[method] = g;
  size_t slots = 0;
  for (const auto* v : g->inputs()) slots = std::max(slots, v->unique() + 1);
  std::vector<jit::Node*> nodes;
  collect_nodes(g->block(), nodes);
  for (const auto* n : nodes) {
    for (const auto* v : n->outputs()) slots = std::max(slots, v->unique() + 1);
    for (const auto* b : n->blocks())
      for (const auto* v : b->inputs()) slots = std::max(slots, v->unique() + 1);
  }
  p.slots[method] = slots;
  prepare_nodes(p, *g, g->block());
}

/// Fills `p.children` for the reads of `owner`'s own children in every prepared method.
void resolve_children(ScriptProgram& p, torch::nn::Module& owner) {
  const auto children = owner.named_children();
  for (const auto& [method, g] : p.methods) {
    std::vector<jit::Node*> nodes;
    collect_nodes(g->block(), nodes);
    for (const auto* n : nodes)
      if (n->kind() == c10::prim::GetAttr && n->input(0) == g->inputs()[0])
        if (const auto* child = children.find(n->s(c10::attr::name))) p.children[n] = child->get();
  }
}

/// "forward", or "forward1", "forward2", ... (the tracer's names for the later calls of a module).
bool is_forward(const std::string& method) {
  return method.rfind("forward", 0) == 0 &&
         method.find_first_not_of("0123456789", 7) == std::string::npos;
}

void mirror(const jit::Module& m, torch::nn::Module& owner, const std::string& name,
            const std::shared_ptr<ScriptContext>& ctx) {
  for (const auto& p : m.named_parameters(false)) owner.register_parameter(p.name, p.value);
  for (const auto& b : m.named_buffers(false)) owner.register_buffer(b.name, b.value);
  for (const auto& child : m.named_children()) {
    const std::string path = name.empty() ? child.name : name + "." + child.name;
    if (auto leaf = make_leaf(child.value)) {
      owner.register_module(child.name, leaf);
      continue;
    }
    auto block = std::make_shared<ScriptedBlockImpl>(ctx);
    mirror(child.value, *block, path, ctx);
    owner.register_module(child.name, block);
  }
  auto program = std::make_shared<ScriptProgram>();
  program->module = m;
  program->name = name;
  program->where = module_where(ctx->file, name);
  // A traced module called more than once has one method per call: forward, forward1, ...
  for (const auto& method : m.get_methods())
    if (is_forward(method.name())) prepare_method(*program, method.name());
  resolve_children(*program, owner);
  ctx->programs[&owner] = program;
}

// --- Running ---------------------------------------------------------------------------------

c10::IValue call_method(const ScriptContext& ctx, torch::nn::Module& self,
                        const std::string& method, std::vector<c10::IValue> args);

c10::IValue call_leaf(torch::nn::Module& m, const std::vector<c10::IValue>& args,
                      const std::string& where) {
  if (args.size() != 1 || !args[0].isTensor())
    throw InputError(where + ": calls a " + m.name() + " with other than one tensor");
  const auto& x = args[0].toTensor();
  if (auto* c = m.as<torch::nn::Conv2d>()) return c->forward(x);
  if (auto* t = m.as<torch::nn::ConvTranspose2d>()) return t->forward(x);
  if (auto* l = m.as<torch::nn::Linear>()) return l->forward(x);
  if (auto* b2 = m.as<torch::nn::BatchNorm2d>()) return b2->forward(x);
  if (auto* b1 = m.as<torch::nn::BatchNorm1d>()) return b1->forward(x);
  if (auto* a = m.as<ActivationImpl>()) return a->forward(x);
  throw InputError(where + ": calls a " + m.name() + ", which igb cannot run");
}

/// One call of a method: the values of its graph and which of them are modules, in slots by
/// Value::unique().
struct Frame {
  Frame(const ScriptContext& c, const ScriptProgram& p, size_t slots)
      : ctx(c), program(p), values_(slots), modules_(slots, nullptr), set_(slots, 0) {}

  const ScriptContext& ctx;
  const ScriptProgram& program;

  void put(const jit::Value* v, c10::IValue x) {
    values_[v->unique()] = std::move(x);
    set_[v->unique()] = 1;
  }
  void put_module(const jit::Value* v, torch::nn::Module* m) { modules_[v->unique()] = m; }
  torch::nn::Module* module(const jit::Value* v) const { return modules_[v->unique()]; }
  const c10::IValue& value(const jit::Value* v, const jit::Node* user) const {
    if (set_[v->unique()]) return values_[v->unique()];
    throw InputError(program.where + ": op " + kind_name(user) +
                     (module(v) ? " takes a module as a value; igb runs calls of a "
                                  "submodule's forward and reads of its attributes only"
                                : " reads a value no op produced"));
  }
  void copy(const jit::Value* from, const jit::Value* to, const jit::Node* user) {
    if (auto* m = module(from))
      put_module(to, m);
    else
      put(to, value(from, user));
  }

 private:
  std::vector<c10::IValue> values_;
  std::vector<torch::nn::Module*> modules_;
  std::vector<char> set_;
};

void run_block(Frame& f, jit::Block* block);

void run_get_attr(Frame& f, jit::Node* n) {
  auto cached = f.program.children.find(n);
  if (cached != f.program.children.end()) {
    f.put_module(n->output(), cached->second);
    return;
  }
  torch::nn::Module* owner = f.module(n->input(0));
  if (!owner)
    throw InputError(f.program.where + ": reads attribute '" + n->s(c10::attr::name) +
                     "' of an object that is not a module");
  torch::nn::Module& m = *owner;
  const std::string name = n->s(c10::attr::name);
  const auto children = m.named_children();
  if (const auto* child = children.find(name)) {
    f.put_module(n->output(), child->get());
    return;
  }
  const auto params = m.named_parameters(false);
  if (const auto* p = params.find(name)) {
    f.put(n->output(), *p);
    return;
  }
  const auto buffers = m.named_buffers(false);
  if (const auto* b = buffers.find(name)) {
    f.put(n->output(), *b);
    return;
  }
  if (name == "training") {
    f.put(n->output(), m.is_training());
    return;
  }
  auto program = f.ctx.programs.find(&m);
  if (program == f.ctx.programs.end() || !program->second->module.hasattr(name))
    throw InputError(f.program.where + ": reads attribute '" + name + "', which igb's " + m.name() +
                     " does not have");
  f.put(n->output(), program->second->module.attr(name));
}

void run_call_method(Frame& f, jit::Node* n) {
  torch::nn::Module* called = f.module(n->input(0));
  if (!called)
    throw InputError(f.program.where + ": calls a method of an object that is not a module");
  torch::nn::Module& target = *called;
  std::vector<c10::IValue> args;
  for (size_t i = 1; i < n->inputs().size(); ++i) args.push_back(f.value(n->input(i), n));
  const std::string method = n->s(c10::attr::name);
  c10::IValue out;
  if (f.ctx.programs.count(&target)) {
    TraceScope scope(&target);
    out = call_method(f.ctx, target, method, std::move(args));
  } else {
    if (!is_forward(method))
      throw InputError(f.program.where + ": calls '" + method + "' of a " + target.name() +
                       "; igb runs the forward of torch.nn modules only");
    TraceScope scope(&target);
    out = call_leaf(target, args, f.program.where);
  }
  f.put(n->output(), std::move(out));
}

void run_loop(Frame& f, jit::Node* n) {
  const int64_t trips = f.value(n->input(0), n).toInt();
  bool go = f.value(n->input(1), n).toBool();
  std::vector<c10::IValue> carried;
  for (size_t i = 2; i < n->inputs().size(); ++i) carried.push_back(f.value(n->input(i), n));
  auto* body = n->blocks()[0];
  for (int64_t i = 0; i < trips && go; ++i) {
    f.put(body->inputs()[0], i);
    for (size_t j = 0; j < carried.size(); ++j) f.put(body->inputs()[j + 1], carried[j]);
    run_block(f, body);
    go = f.value(body->outputs()[0], n).toBool();
    for (size_t j = 0; j < carried.size(); ++j) carried[j] = f.value(body->outputs()[j + 1], n);
  }
  for (size_t j = 0; j < carried.size(); ++j) f.put(n->outputs()[j], carried[j]);
}

void run_operator(Frame& f, jit::Node* n) {
  jit::Stack stack;
  stack.reserve(n->inputs().size());
  for (auto* in : n->inputs()) stack.push_back(f.value(in, n));
  try {
    if (!run_container_node(n, stack)) const_cast<jit::Operation&>(f.program.ops.at(n))(stack);
  } catch (const c10::Error& e) {
    throw InputError(f.program.where + ": op " + kind_name(n) + " failed" +
                     library_error_detail(e));
  }
  const size_t outs = n->outputs().size();
  for (size_t i = 0; i < outs; ++i)
    f.put(n->outputs()[i], std::move(stack[stack.size() - outs + i]));
}

void run_block(Frame& f, jit::Block* block) {
  for (auto* n : block->nodes()) {
    const auto kind = n->kind();
    if (kind == c10::prim::Constant) {
      auto c = f.program.constants.find(n);
      if (c != f.program.constants.end()) f.put(n->output(), c->second);
    } else if (kind == c10::prim::GetAttr) {
      run_get_attr(f, n);
    } else if (kind == c10::prim::CallMethod) {
      run_call_method(f, n);
    } else if (kind == c10::prim::If) {
      auto* chosen = n->blocks()[f.value(n->input(0), n).toBool() ? 0 : 1];
      run_block(f, chosen);
      for (size_t i = 0; i < n->outputs().size(); ++i)
        f.copy(chosen->outputs()[i], n->outputs()[i], n);
    } else if (kind == c10::prim::Loop) {
      run_loop(f, n);
    } else {
      run_operator(f, n);
    }
  }
}

c10::IValue call_method(const ScriptContext& ctx, torch::nn::Module& self,
                        const std::string& method, std::vector<c10::IValue> args) {
  const auto& program = *ctx.programs.at(&self);
  auto it = program.methods.find(method);
  if (it == program.methods.end())
    throw InputError(program.where + ": method '" + method +
                     "' is called on a submodule; igb runs a submodule's forward only");
  jit::Graph& g = *it->second;
  if (args.size() + 1 != g.inputs().size())
    throw InputError(program.where + ": " + method + " takes " +
                     std::to_string(g.inputs().size() - 1) + " inputs, given " +
                     std::to_string(args.size()));
  Frame f(ctx, program, program.slots.at(method));
  f.put_module(g.inputs()[0], &self);
  for (size_t i = 0; i < args.size(); ++i) f.put(g.inputs()[i + 1], std::move(args[i]));
  run_block(f, g.block());
  return f.value(g.outputs()[0], g.return_node());
}

}  // namespace

ScriptBody::ScriptBody() = default;
ScriptBody::~ScriptBody() = default;
ScriptBody::ScriptBody(ScriptBody&&) noexcept = default;
ScriptBody& ScriptBody::operator=(ScriptBody&&) noexcept = default;

void ScriptBody::build(const torch::jit::Module& module, torch::nn::Module& owner,
                       const std::string& file) {
  ctx_ = std::make_shared<ScriptContext>();
  ctx_->file = file;
  mirror(module, owner, "", ctx_);
}

c10::IValue ScriptBody::run(torch::nn::Module& owner, std::vector<c10::IValue> inputs) const {
  return call_method(*ctx_, owner, "forward", std::move(inputs));
}

ScriptedBlockImpl::ScriptedBlockImpl(std::shared_ptr<ScriptContext> ctx)
    : torch::nn::Module("ScriptedBlock"), ctx_(std::move(ctx)) {}

c10::IValue ScriptedBlockImpl::forward(std::vector<c10::IValue> inputs) {
  return call_method(*ctx_, *this, "forward", std::move(inputs));
}

}  // namespace igb::models
