#include "models/onnx/onnx_body.h"

#include <ATen/Functions.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "core/activation.h"
#include "core/checkpoint.h"
#include "core/conv_transpose.h"
#include "core/error.h"
#include "models/onnx/onnx_names.h"
#include "models/onnx/onnx_ops.h"

namespace igb::models::onnx_import {

namespace {

using Tensors = std::vector<at::Tensor>;

/// One node's work at run time.
struct Step {
  std::vector<int> in;
  std::vector<int> out;
  OpRun run;
  std::string where;
  /// Slots no later step reads: released after this step.
  std::vector<int> release;
};

}  // namespace

struct OnnxBody::State {
  std::shared_ptr<const OnnxGraph> graph;
  std::vector<Step> steps;
  /// Values every run starts from: constants, buffers and parameters nodes read.
  std::vector<at::Tensor> initial;
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  std::vector<ImportedName> names;
};

namespace {

/// What the build knows while it walks the nodes.
class Builder {
 public:
  Builder(const OnnxGraph& g, torch::nn::Module& owner, bool native, OnnxBody::State& s)
      : g_(g), owner_(owner), namer_(owner), native_(native), s_(s) {
    for (const auto& n : g.nodes) {
      for (const auto& in : n.inputs)
        if (!in.empty()) ++readers_[in];
      ++scope_nodes_[scope_path(n.name)];
    }
  }

  void build(const Tensors& samples) {
    if (samples.size() != g_.inputs.size())
      throw InputError(g_.file.path + ": the graph takes " + std::to_string(g_.inputs.size()) +
                       " inputs, given " + std::to_string(samples.size()));
    for (size_t i = 0; i < samples.size(); ++i) {
      const int slot = slot_of(g_.inputs[i].name);
      s_.input_slots.push_back(slot);
      sample_[g_.inputs[i].name] = samples[i];
    }
    for (const auto& node : g_.nodes) add_node(node);
    for (const auto& out : g_.outputs) {
      if (!slots_.count(out) && !constant_.count(out) && !g_.initializers.count(out))
        throw InputError(g_.file.path + ": graph output '" + out + "' is not computed");
      s_.output_slots.push_back(value_slot(out));
    }
    record_unclaimed();
    plan_releases();
  }

 private:
  int slot_of(const std::string& name) {
    const auto it = slots_.find(name);
    if (it != slots_.end()) return it->second;
    const int slot = static_cast<int>(s_.initial.size());
    s_.initial.emplace_back();
    slots_[name] = slot;
    return slot;
  }

  /// The slot of a value a step reads: constants and initializers get one holding their tensor.
  int value_slot(const std::string& name) {
    if (slots_.count(name)) return slots_[name];
    const int slot = slot_of(name);
    if (constant_.count(name)) {
      s_.initial[slot] = constant_[name];
    } else if (g_.initializers.count(name)) {
      s_.initial[slot] = initializer_value(name);
    }
    return slot;
  }

  /// An initializer read by operators: float tensors of more than one element are buffers of the
  /// model (so thinning and checkpoints see them), the rest constants.
  at::Tensor initializer_value(const std::string& name) {
    const auto it = held_.find(name);
    if (it != held_.end()) return it->second;
    const at::Tensor& t = g_.initializers.at(name);
    at::Tensor value = t;
    if (at::isFloatingType(t.scalar_type()) && t.numel() > 1) {
      const std::string igb = namer_.add_buffer(name, t.clone());
      value = owner_.named_buffers(false)[igb];
      s_.names.push_back({name, igb, "buffer"});
    }
    held_[name] = value;
    return value;
  }

  bool is_constant(const std::string& name) const {
    if (constant_.count(name)) return true;
    const auto it = g_.initializers.find(name);
    return it != g_.initializers.end() &&
           !(at::isFloatingType(it->second.scalar_type()) && it->second.numel() > 1);
  }

  at::Tensor constant_value(const std::string& name) const {
    const auto c = constant_.find(name);
    if (c != constant_.end()) return c->second;
    return g_.initializers.at(name);
  }

  at::Tensor sample_value(const std::string& name) const {
    const auto s = sample_.find(name);
    if (s != sample_.end()) return s->second;
    const auto c = constant_.find(name);
    if (c != constant_.end()) return c->second;
    const auto i = g_.initializers.find(name);
    return i != g_.initializers.end() ? i->second : at::Tensor();
  }

  /// Input `i` of `node` as a weight a module may own: a float initializer nothing else reads.
  const at::Tensor* claimable(const OnnxNode& node, size_t i, int64_t dim) const {
    if (i >= node.inputs.size() || node.inputs[i].empty()) return nullptr;
    const auto& name = node.inputs[i];
    const auto it = g_.initializers.find(name);
    if (it == g_.initializers.end() || held_.count(name) || readers_.at(name) != 1) return nullptr;
    if (!at::isFloatingType(it->second.scalar_type()) || it->second.scalar_type() == at::kHalf ||
        it->second.scalar_type() == at::kBFloat16)
      return nullptr;
    if (dim >= 0 && it->second.dim() != dim) return nullptr;
    return &it->second;
  }

  bool is_graph_output(const std::string& name) const {
    return std::find(g_.outputs.begin(), g_.outputs.end(), name) != g_.outputs.end();
  }

  void claim(const std::string& initializer, const std::string& igb) {
    s_.names.push_back({initializer, igb, "parameter"});
  }

  /// An activation's module path: its module scope (an nn.ReLU "/layer1/relu/Relu" ->
  /// "layer1.relu"), or, where other nodes share the scope (a functional relu in a block's
  /// forward), the scope and the op ("layer1.0.relu"); without a scope, the node's name or
  /// "<op>_<index>".
  std::string activation_path(const OnnxNode& node) const {
    std::string op = node.op_type;
    for (auto& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string scope = scope_path(node.name);
    if (!scope.empty()) return scope_nodes_.at(scope) == 1 ? scope : scope + "." + op;
    std::string base = node.name;
    while (!base.empty() && base.front() == '/') base.erase(base.begin());
    if (base.empty()) base = op + "_" + std::to_string(node.index);
    return legal_name(base, false);
  }

  /// The weight, bias, groups and window of a Conv or ConvTranspose a module can take (a 2-D
  /// weight and bias the node alone reads); nullopt otherwise.
  struct ConvParts {
    const at::Tensor* w = nullptr;
    const at::Tensor* b = nullptr;
    bool has_bias = false;
    int64_t groups = 1;
    Window win;
  };
  std::optional<ConvParts> conv_parts(const OnnxNode& node, const NodeView& view) const;
  /// Registers `module` under the path its weight (the node's input 1) names, copies `w` and `b`
  /// (input 2, when given) into its `weight` and `bias`, and returns the path.
  std::string adopt(const OnnxNode& node, std::shared_ptr<torch::nn::Module> module,
                    at::Tensor& weight, const at::Tensor& w, at::Tensor* bias, const at::Tensor* b);

  OpRun native_step(const OnnxNode& node, const NodeView& view);
  OpRun native_conv(const OnnxNode& node, const NodeView& view);
  OpRun native_conv_transpose(const OnnxNode& node, const NodeView& view);
  OpRun native_linear(const OnnxNode& node, const NodeView& view);
  OpRun native_batch_norm(const OnnxNode& node, const NodeView& view);
  OpRun native_dropout(const OnnxNode& node, const NodeView& view);
  OpRun native_activation(const OnnxNode& node, const NodeView& view);

  void add_node(const OnnxNode& node);
  void record_unclaimed();
  void plan_releases();

  const OnnxGraph& g_;
  torch::nn::Module& owner_;
  Namer namer_;
  bool native_;
  OnnxBody::State& s_;
  std::map<std::string, int> readers_;
  /// Nodes per module scope (scope_path).
  std::map<std::string, int> scope_nodes_;
  std::map<std::string, int> slots_;
  std::map<std::string, at::Tensor> constant_;
  std::map<std::string, at::Tensor> sample_;
  std::map<std::string, at::Tensor> held_;
};

std::optional<Builder::ConvParts> Builder::conv_parts(const OnnxNode& node,
                                                      const NodeView& view) const {
  ConvParts p;
  p.w = claimable(node, 1, 4);
  p.has_bias = view.has_input(2);
  p.b = p.has_bias ? claimable(node, 2, 1) : nullptr;
  if (!p.w || (p.has_bias && !p.b) || view.sample(0).dim() != 4) return std::nullopt;
  p.groups = view.i("group", 1);
  p.win = read_window(view, 2, {p.w->size(2), p.w->size(3)});
  return p;
}

std::string Builder::adopt(const OnnxNode& node, std::shared_ptr<torch::nn::Module> module,
                           at::Tensor& weight, const at::Tensor& w, at::Tensor* bias,
                           const at::Tensor* b) {
  const std::string path =
      namer_.add_module(path_of(node.inputs[1], ".weight", node.name), std::move(module));
  weight.detach().copy_(w);
  claim(node.inputs[1], path + ".weight");
  if (b) {
    bias->detach().copy_(b->reshape({-1}));
    claim(node.inputs[2], path + ".bias");
  }
  return path;
}

OpRun Builder::native_conv(const OnnxNode& node, const NodeView& view) {
  const auto parts = conv_parts(node, view);
  if (!parts) return nullptr;
  const at::Tensor* w = parts->w;
  const bool has_bias = parts->has_bias;
  const int64_t groups = parts->groups;
  const Window& win = parts->win;
  const bool fixed = win.auto_pad == "NOTSET" || win.auto_pad == "VALID";
  const auto pads = win.pads_for(view.sample(0).sizes().slice(2));
  const bool in_module = fixed && Window::symmetric(pads);
  auto opts = torch::nn::Conv2dOptions(w->size(1) * groups, w->size(0), {w->size(2), w->size(3)})
                  .stride(win.strides)
                  .dilation(win.dilations)
                  .groups(groups)
                  .bias(has_bias);
  if (in_module) opts.padding(std::vector<int64_t>{pads[0], pads[1]});
  torch::nn::Conv2d conv(opts);
  adopt(node, conv.ptr(), conv->weight, *w, &conv->bias, parts->b);
  if (in_module)
    return [conv = conv.ptr()](const Tensors& in) -> Tensors { return {conv->forward(in[0])}; };
  return [conv = conv.ptr(), win](const Tensors& in) -> Tensors {
    return {conv->forward(pad_spatial(in[0], win.pads_for(in[0].sizes().slice(2)), 0.0))};
  };
}

OpRun Builder::native_conv_transpose(const OnnxNode& node, const NodeView& view) {
  const auto parts = conv_parts(node, view);
  if (!parts) return nullptr;
  const at::Tensor* w = parts->w;
  const int64_t groups = parts->groups;
  const Window& win = parts->win;
  auto out_pad = view.ints("output_padding");
  if (out_pad.empty()) out_pad.assign(2, 0);
  if ((win.auto_pad != "NOTSET" && win.auto_pad != "VALID") || view.has("output_shape") ||
      !Window::symmetric(win.pads) || out_pad.size() != 2)
    return nullptr;
  for (size_t i = 0; i < 2; ++i)
    if (out_pad[i] >= std::max(win.strides[i], win.dilations[i])) return nullptr;
  const auto pads = win.auto_pad == "VALID" ? std::vector<int64_t>{0, 0, 0, 0} : win.pads;
  torch::nn::ConvTranspose2d deconv(
      torch::nn::ConvTranspose2dOptions(w->size(0), w->size(1) * groups, {w->size(2), w->size(3)})
          .stride(win.strides)
          .padding(std::vector<int64_t>{pads[0], pads[1]})
          .output_padding(out_pad)
          .dilation(win.dilations)
          .groups(groups)
          .bias(parts->has_bias));
  adopt(node, deconv.ptr(), deconv->weight, *w, &deconv->bias, parts->b);
  // As the zoo's SR models: the sub-pixel form, an order of magnitude faster on CPU.
  return [deconv = deconv.ptr()](const Tensors& in) -> Tensors {
    return {fast_conv_transpose2d(*deconv, in[0])};
  };
}

/// Gemm (A·B + C, B and C constant, no transA, alpha and beta 1) and MatMul with a constant 2-D
/// right operand: a Linear whose weight is B, transposed unless Gemm's transB.
OpRun Builder::native_linear(const OnnxNode& node, const NodeView& view) {
  const bool gemm = node.op_type == "Gemm";
  const at::Tensor* w = claimable(node, 1, 2);
  if (!w || !view.sample(0).defined() || view.sample(0).dim() < 1) return nullptr;
  const at::Tensor* b = nullptr;
  bool trans_b = false;
  if (gemm) {
    if (view.i("transA", 0) != 0 || view.f("alpha", 1.0f) != 1.0f || view.sample(0).dim() != 2)
      return nullptr;
    trans_b = view.i("transB", 0) != 0;
    if (view.has_input(2)) {
      if (view.f("beta", 1.0f) != 1.0f) return nullptr;
      b = claimable(node, 2, -1);
      const int64_t n = trans_b ? w->size(0) : w->size(1);
      if (!b || b->numel() != n || (b->dim() == 2 && b->size(0) != 1) || b->dim() > 2)
        return nullptr;
    }
  }
  const at::Tensor weight = trans_b ? *w : w->t();
  torch::nn::Linear linear(
      torch::nn::LinearOptions(weight.size(1), weight.size(0)).bias(b != nullptr));
  adopt(node, linear.ptr(), linear->weight, weight, &linear->bias, b);
  return [linear = linear.ptr()](const Tensors& in) -> Tensors { return {linear->forward(in[0])}; };
}

OpRun Builder::native_batch_norm(const OnnxNode& node, const NodeView& view) {
  const auto& x = view.sample(0);
  if (!x.defined() || x.dim() < 2 || x.dim() > 4) return nullptr;
  // The running and saved statistics of a graph exported for training (opsets 9 to 13) may be
  // listed as outputs that nothing reads: the module keeps its own.
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty() &&
        (readers_.count(node.outputs[i]) || is_graph_output(node.outputs[i])))
      return nullptr;
  if (view.opset() >= 14 && view.i("training_mode", 0) != 0) return nullptr;
  if (view.opset() < 9 && view.i("spatial", 1) != 1) return nullptr;
  std::array<const at::Tensor*, 4> t{};
  for (size_t i = 0; i < 4; ++i) {
    t[i] = claimable(node, i + 1, 1);
    if (!t[i] || t[i]->size(0) != x.size(1)) return nullptr;
  }
  auto opts = torch::nn::BatchNormOptions(x.size(1))
                  .eps(view.f("epsilon", 1e-5f))
                  .momentum(1.0 - view.f("momentum", 0.9f));
  std::shared_ptr<torch::nn::Module> module;
  torch::nn::BatchNorm1d bn1{nullptr};
  torch::nn::BatchNorm2d bn2{nullptr};
  at::Tensor *weight, *bias, *mean, *var;
  if (x.dim() == 4) {
    bn2 = torch::nn::BatchNorm2d(opts);
    module = bn2.ptr();
    weight = &bn2->weight, bias = &bn2->bias, mean = &bn2->running_mean, var = &bn2->running_var;
  } else {
    bn1 = torch::nn::BatchNorm1d(opts);
    module = bn1.ptr();
    weight = &bn1->weight, bias = &bn1->bias, mean = &bn1->running_mean, var = &bn1->running_var;
  }
  const std::string path = namer_.add_module(path_of(node.inputs[1], ".weight", node.name), module);
  const char* const kNames[] = {".weight", ".bias", ".running_mean", ".running_var"};
  at::Tensor* dst[] = {weight, bias, mean, var};
  for (size_t i = 0; i < 4; ++i) {
    dst[i]->detach().copy_(*t[i]);
    claim(node.inputs[i + 1], path + kNames[i]);
  }
  if (bn2) return [bn2 = bn2.ptr()](const Tensors& in) -> Tensors { return {bn2->forward(in[0])}; };
  return [bn1 = bn1.ptr()](const Tensors& in) -> Tensors { return {bn1->forward(in[0])}; };
}

OpRun Builder::native_activation(const OnnxNode& node, const NodeView& view) {
  const auto& x = view.sample(0);
  if (!x.defined() || !at::isFloatingType(x.scalar_type()) || node.outputs.size() != 1)
    return nullptr;
  std::optional<ActivationOptions> opts;
  std::string path = activation_path(node);
  const at::Tensor* slope = nullptr;
  if (node.op_type == "Relu") {
    opts = ActivationOptions(ActivationKind::kReLU);
  } else if (node.op_type == "Sigmoid") {
    opts = ActivationOptions(ActivationKind::kSigmoid);
  } else if (node.op_type == "Tanh") {
    opts = ActivationOptions(ActivationKind::kTanh);
  } else if (node.op_type == "LeakyRelu") {
    opts = ActivationOptions(ActivationKind::kLeakyReLU).negative_slope(view.f("alpha", 0.01f));
  } else if (node.op_type == "Clip") {
    double lo = -1, hi = -1;
    bool has_hi = false;
    if (view.opset() < 11) {
      lo = view.f("min", -1.0f);
      has_hi = view.has("max");
      hi = view.f("max", 0.0f);
    } else {
      if (!view.has_input(1) || !view.constant(1).defined()) return nullptr;
      lo = view.constant(1).item<double>();
      has_hi = view.has_input(2);
      if (has_hi && !view.constant(2).defined()) return nullptr;
      if (has_hi) hi = view.constant(2).item<double>();
    }
    if (lo != 0.0 || (has_hi && hi != 6.0)) return nullptr;
    opts = ActivationOptions(has_hi ? ActivationKind::kReLU6 : ActivationKind::kReLU);
  } else if (node.op_type == "PRelu") {
    slope = claimable(node, 1, -1);
    if (!slope || x.dim() < 2) return nullptr;
    const int64_t n = slope->numel();
    // The slopes must run along dimension 1 of the input, as LibTorch's PReLU reads them.
    // (Before opset 7 a 1-D slope of the channel count does.)
    const bool legacy = view.opset() < 7 && slope->dim() == 1 && n == x.size(1);
    if (n != 1 && !legacy) {
      if (n != x.size(1) || slope->dim() > x.dim() - 1) return nullptr;
      for (int64_t d = 0; d < slope->dim(); ++d) {
        const int64_t xd = x.dim() - slope->dim() + d;
        if (slope->size(d) != (xd == 1 ? n : 1)) return nullptr;
      }
    }
    opts = ActivationOptions(ActivationKind::kPReLU).num_parameters(n);
    path = path_of(node.inputs[1], ".weight", node.name);
  } else {
    return nullptr;
  }
  Activation act(*opts);
  const std::string got = namer_.add_module(path, act.ptr());
  if (slope) {
    act->weight.detach().copy_(slope->reshape({-1}));
    claim(node.inputs[1], got + ".weight");
  }
  return [act = act.ptr()](const Tensors& in) -> Tensors { return {act->forward(in[0])}; };
}

OpRun Builder::native_step(const OnnxNode& node, const NodeView& view) {
  if (!native_ || !node.domain.empty()) return nullptr;
  if (node.op_type == "Conv") return native_conv(node, view);
  if (node.op_type == "ConvTranspose") return native_conv_transpose(node, view);
  if (node.op_type == "Gemm" || node.op_type == "MatMul") return native_linear(node, view);
  if (node.op_type == "BatchNormalization") return native_batch_norm(node, view);
  if (node.op_type == "Dropout") return native_dropout(node, view);
  return native_activation(node, view);
}

/// Dropout in a graph exported for training (training_mode a constant true, its mask read by
/// nothing): a torch::nn::Dropout, which drops while the model trains and passes its input
/// through in evaluation, as the PyTorch model it came from.
OpRun Builder::native_dropout(const OnnxNode& node, const NodeView& view) {
  if (view.opset() < 12 || !view.has_input(2) || !view.constant(2).defined()) return nullptr;
  const auto& mode = view.constant(2);
  if (mode.numel() == 0 || !mode.reshape({-1})[0].item<bool>()) return nullptr;
  if (node.outputs.size() > 1 && !node.outputs[1].empty() &&
      (readers_.count(node.outputs[1]) || is_graph_output(node.outputs[1])))
    return nullptr;
  double ratio = 0.5;
  if (view.has_input(1)) {
    if (!view.constant(1).defined()) return nullptr;
    ratio = view.constant(1).reshape({}).item<double>();
  }
  if (!(ratio >= 0.0 && ratio < 1.0)) return nullptr;
  torch::nn::Dropout drop{torch::nn::DropoutOptions(ratio)};
  namer_.add_module(activation_path(node), drop.ptr());
  return [drop = drop.ptr()](const Tensors& in) -> Tensors { return {drop->forward(in[0])}; };
}

void Builder::add_node(const OnnxNode& node) {
  const std::string& file = g_.file.path;
  const auto& table = onnx_op_table();
  const auto op = table.find(node.op_type);
  if (!node.domain.empty() || op == table.end())
    throw InputError(file + ": " + node.label().substr(0, node.label().size() - 1) +
                     (node.domain.empty() ? "" : ", domain " + node.domain) + ", opset " +
                     std::to_string(g_.file.opset) +
                     "): igb does not import this operator (docs/onnx-import.md lists those it "
                     "does)");
  Tensors constants, samples;
  bool all_constant = true;
  for (const auto& in : node.inputs) {
    if (in.empty()) {
      constants.emplace_back();
      samples.emplace_back();
      continue;
    }
    const bool c = is_constant(in);
    all_constant = all_constant && c;
    constants.push_back(c ? constant_value(in) : at::Tensor());
    samples.push_back(sample_value(in));
  }
  const NodeView view(node, g_.file.opset, file, constants, samples);
  OpRun run = native_step(node, view);
  const bool native = static_cast<bool>(run);
  if (!run) run = op->second(view);
  Tensors outs;
  try {
    torch::NoGradGuard no_grad;
    outs = run(samples);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw OnnxRunError(view.where() + ": fails on the model's input" + library_error_detail(e));
  }
  const bool fold = all_constant && !native;
  Step step;
  step.run = std::move(run);
  step.where = view.where();
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const auto& name = node.outputs[i];
    if (name.empty()) {
      step.out.push_back(-1);
      continue;
    }
    if (i >= outs.size() || !outs[i].defined()) {
      if (!readers_.count(name) && !is_graph_output(name)) {
        step.out.push_back(-1);
        continue;
      }
      view.refuse("does not compute its output " + std::to_string(i) + " ('" + name + "')");
    }
    if (fold) {
      constant_[name] = outs[i];
    } else {
      sample_[name] = outs[i];
      step.out.push_back(slot_of(name));
    }
  }
  if (fold) return;
  // A module reads its layer's input alone; its weights are its own.
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const auto& name = node.inputs[i];
    step.in.push_back(name.empty() || (native && i > 0) ? -1 : value_slot(name));
  }
  s_.steps.push_back(std::move(step));
}

void Builder::record_unclaimed() {
  std::map<std::string, ImportedName> by_name;
  for (const auto& n : s_.names) by_name.emplace(n.onnx, n);
  std::vector<ImportedName> ordered;
  for (const auto& name : g_.initializer_order) {
    const auto it = by_name.find(name);
    if (it != by_name.end())
      ordered.push_back(it->second);
    else
      ordered.push_back({name, "", readers_.count(name) ? "constant" : "unused"});
  }
  s_.names = std::move(ordered);
}

void Builder::plan_releases() {
  std::vector<int> last(s_.initial.size(), -1);
  for (size_t i = 0; i < s_.steps.size(); ++i)
    for (int slot : s_.steps[i].in)
      if (slot >= 0) last[slot] = static_cast<int>(i);
  std::set<int> keep(s_.output_slots.begin(), s_.output_slots.end());
  for (size_t slot = 0; slot < last.size(); ++slot)
    if (last[slot] >= 0 && !keep.count(static_cast<int>(slot)))
      s_.steps[last[slot]].release.push_back(static_cast<int>(slot));
}

}  // namespace

OnnxBody::OnnxBody(std::shared_ptr<const OnnxGraph> graph, torch::nn::Module& owner,
                   const std::vector<at::Tensor>& samples, bool native)
    : s_(std::make_unique<State>()) {
  s_->graph = std::move(graph);
  Builder(*s_->graph, owner, native, *s_).build(samples);
}

OnnxBody::~OnnxBody() = default;
OnnxBody::OnnxBody(OnnxBody&&) noexcept = default;
OnnxBody& OnnxBody::operator=(OnnxBody&&) noexcept = default;

std::vector<at::Tensor> OnnxBody::run(const std::vector<at::Tensor>& inputs) const {
  std::vector<at::Tensor> slots = s_->initial;
  for (size_t i = 0; i < s_->input_slots.size() && i < inputs.size(); ++i)
    slots[s_->input_slots[i]] = inputs[i];
  Tensors in;
  for (const auto& step : s_->steps) {
    in.clear();
    for (int slot : step.in) in.push_back(slot >= 0 ? slots[slot] : at::Tensor());
    Tensors out;
    try {
      out = step.run(in);
    } catch (const InputError&) {
      throw;
    } catch (const std::exception& e) {
      throw OnnxRunError(step.where + ": fails" + library_error_detail(e));
    }
    for (size_t i = 0; i < step.out.size() && i < out.size(); ++i)
      if (step.out[i] >= 0) slots[step.out[i]] = std::move(out[i]);
    for (int slot : step.release) slots[slot] = at::Tensor();
  }
  std::vector<at::Tensor> outputs;
  for (int slot : s_->output_slots) outputs.push_back(slots[slot]);
  return outputs;
}

const std::vector<ImportedName>& OnnxBody::names() const { return s_->names; }

std::vector<std::string> unsupported_ops(const OnnxGraph& graph) {
  const auto& table = onnx_op_table();
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& n : graph.nodes) {
    const std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type;
    if ((n.domain.empty() && table.count(n.op_type)) || !seen.insert(key).second) continue;
    out.push_back(key + " (" + n.label() + ")");
  }
  return out;
}

}  // namespace igb::models::onnx_import
