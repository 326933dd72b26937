#include "compress/post_train_quantizer.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <chrono>
#include <cmath>
#include <set>
#include <utility>

#include "core/activation.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/progress.h"
#include "core/train_mode_guard.h"
#include "graph/summary_graph.h"

namespace igb::compress {

namespace {

bool is_weight_layer(const torch::nn::Module& m) {
  return dynamic_cast<const torch::nn::Conv2dImpl*>(&m) ||
         dynamic_cast<const torch::nn::LinearImpl*>(&m);
}

at::Tensor* weight_of(torch::nn::Module& m) {
  if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(&m)) return &c->weight;
  if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(&m)) return &l->weight;
  return nullptr;
}

at::Tensor* bias_of(torch::nn::Module& m) {
  at::Tensor* b = nullptr;
  if (auto* c = dynamic_cast<torch::nn::Conv2dImpl*>(&m)) b = &c->bias;
  if (auto* l = dynamic_cast<torch::nn::LinearImpl*>(&m)) b = &l->bias;
  return b && b->defined() ? b : nullptr;
}

/// In an activation slot: records statistics (calibration) or fake-quantizes the slot's input
/// (the output of the conv feeding it) and its output.
class PtqSlotImpl : public torch::nn::Module {
 public:
  PtqSlotImpl(ActivationImpl* act, std::string name) : act_(act), name_(std::move(name)) {}
  at::Tensor forward(const at::Tensor& x) {
    if (stats_) {
      auto& l = stats_->at(name_);
      l.inputs[0].update(x, *pass_);
      at::Tensor y = act_->forward_original(x);
      if (!l.output) l.output = QuantStatsRecord{};
      l.output->update(y, *pass_);
      return y;
    }
    return out_.apply(act_->forward_original(in_.apply(x)));
  }
  QuantStats* stats_ = nullptr;
  const int* pass_ = nullptr;
  ActQuant in_, out_;

 private:
  ActivationImpl* act_;
  std::string name_;
};
TORCH_MODULE(PtqSlot);

// Bias correction: E[(W - Wq) x] per output channel for an input whose channel i has mean m_i,
// away from the borders: the rounding error summed over each filter's taps, weighted by the
// means of the input channels it reads (grouped convolutions read their group's channels).
// Undefined when the means do not fit the weight.
at::Tensor weight_rounding_shift(const at::Tensor& delta, const std::vector<double>& means) {
  if (delta.dim() != 2 && delta.dim() != 4) return {};
  const int64_t cout = delta.size(0), cin_g = delta.size(1);
  const auto cin = static_cast<int64_t>(means.size());
  if (cin == 0 || cin % cin_g != 0 || cout % (cin / cin_g) != 0) return {};
  const int64_t groups = cin / cin_g;
  if (delta.dim() == 2 && groups != 1) return {};
  const at::Tensor taps =
      (delta.dim() == 4 ? delta.sum({2, 3}) : delta).to(at::kDouble).to(at::kCPU);
  const at::Tensor m = at::tensor(means, at::TensorOptions(at::kDouble)).reshape({groups, cin_g});
  const at::Tensor per_out = m.repeat_interleave(cout / groups, 0);
  return (taps * per_out).sum(1).to(at::kFloat).to(delta.device());
}

struct Layer {
  std::string name;
  torch::nn::Module* module = nullptr;
  std::string bn;  // folded batch norm
  torch::nn::BatchNorm2dImpl* bn_module = nullptr;
  std::string input_slot;  // the slot whose output it reads
  bool reads_model_input = false;
  PtqLayerSettings settings;
  // Filled by prepare.
  at::Tensor w_scale;
  std::optional<double> input_scale;
  bool bias_quantized = false;
  std::optional<double> bias_shift;  // largest bias correction
};

struct Slot {
  std::string name;
  ActivationImpl* act = nullptr;
  std::string producer;  // a quantized weight layer whose output it reads
  PtqLayerSettings settings;
};

}  // namespace

namespace {

using ModuleMap = std::map<std::string, std::shared_ptr<torch::nn::Module>>;

/// The modules of `model` by name; InputError when one is quantized or replaced already.
ModuleMap float_modules(torch::nn::Module& model) {
  ModuleMap modules;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    modules[item.key()] = item.value();
    for (const auto& b : item.value()->named_buffers(false))
      if (b.key() == "float_weight" || b.key() == "weight_bits")
        throw InputError("layer " + item.key() +
                         " is quantized already (quantization-aware training); post-training "
                         "quantization needs a float model");
    if (auto* act = dynamic_cast<ActivationImpl*>(item.value().get()); act && act->replaced())
      throw InputError("activation " + item.key() +
                       " is replaced already (a quantizer or an activation observer); "
                       "post-training quantization needs a float model");
  }
  return modules;
}

}  // namespace

struct PostTrainLinearQuantizer::Impl {
  torch::nn::Module* model = nullptr;
  Forward forward;
  std::vector<Layer> layers;
  std::vector<Slot> slots;
  std::string first_layer, last_layer;
  bool last_is_slot = false;
  ActQuant input_q, output_q;
  int pass = 1;
  bool prepared = false;
  std::map<std::string, PtqSlot> installed;
  /// The graph's ops that are weight layers (index into `layers`) and activation slots.
  std::map<int, size_t> layer_of_op;
  std::map<int, std::string> slot_of_op;

  /// Every conv and linear with a weight (with the BatchNorm it folds, when it feeds one alone)
  /// and every activation slot, in trace order; a module called twice is one layer.
  void find_layers(const graph::SummaryGraph& graph, const ModuleMap& modules,
                   const PostTrainOptions& options) {
    const auto& ops = graph.ops();
    auto module_of = [&](int op) -> torch::nn::Module* {
      auto it = modules.find(ops[op].module);
      return it == modules.end() ? nullptr : it->second.get();
    };
    std::set<std::string> seen;
    for (const auto& op : ops) {
      torch::nn::Module* m = module_of(op.id);
      if (!m || seen.count(op.module)) continue;
      if ((op.op_kind == graph::OpKind::kConv || op.op_kind == graph::OpKind::kLinear) &&
          is_weight_layer(*m)) {
        Layer l;
        l.name = op.module;
        l.module = m;
        l.settings = options.settings_for(l.name);
        const auto succ = graph.successors(op.id);
        if (succ.size() == 1 && ops[succ[0]].op_kind == graph::OpKind::kBatchNorm &&
            graph.predecessors(succ[0]).size() == 1 &&
            l.settings.bits.weights != QuantBits::kFloat) {
          if (auto* bn = dynamic_cast<torch::nn::BatchNorm2dImpl*>(module_of(succ[0]))) {
            l.bn = ops[succ[0]].module;
            l.bn_module = bn;
          }
        }
        layer_of_op[op.id] = layers.size();
        layers.push_back(std::move(l));
        seen.insert(op.module);
      } else if (auto* act = dynamic_cast<ActivationImpl*>(m);
                 act && act->options().kind() != ActivationKind::kIdentity) {
        Slot s;
        s.name = op.module;
        s.act = act;
        s.settings = options.settings_for(s.name);
        slot_of_op[op.id] = s.name;
        slots.push_back(std::move(s));
        seen.insert(op.module);
      }
    }
  }

  /// A slot's producer: a weight layer feeding only it, directly or through its folded BN.
  void find_producers(const graph::SummaryGraph& graph) {
    const auto& ops = graph.ops();
    for (auto& s : slots) {
      int op = -1;
      for (const auto& [id, name] : slot_of_op)
        if (name == s.name) op = id;
      const auto pred = graph.predecessors(op);
      if (pred.size() != 1) continue;
      int p = pred[0];
      if (ops[p].op_kind == graph::OpKind::kBatchNorm) {
        const auto pp = graph.predecessors(p);
        if (pp.size() != 1 || !layer_of_op.count(pp[0])) continue;
        if (layers[layer_of_op[pp[0]]].bn != ops[p].module) continue;
        p = pp[0];
      }
      if (!layer_of_op.count(p) || graph.successors(pred[0]).size() != 1) continue;
      const Layer& l = layers[layer_of_op[p]];
      if (l.settings.bits.weights == QuantBits::kFloat) continue;
      s.producer = l.name;
    }
  }

  /// What each weight layer reads, the first layer (the model input's only consumer) and the
  /// last (the output's producer).
  void find_inputs_and_ends(const graph::SummaryGraph& graph) {
    const auto& ops = graph.ops();
    for (const auto& [op, idx] : layer_of_op) {
      const auto pred = graph.predecessors(op);
      if (pred.size() == 1 && slot_of_op.count(pred[0]))
        layers[idx].input_slot = slot_of_op[pred[0]];
    }
    for (int v : graph.inputs()) {
      const auto& consumers = graph.values()[v].consumers;
      if (consumers.size() == 1 && !ops[consumers[0]].module.empty()) {
        first_layer = ops[consumers[0]].module;
        if (layer_of_op.count(consumers[0]))
          layers[layer_of_op[consumers[0]]].reads_model_input = true;
      }
    }
    for (int v : graph.outputs()) {
      const int p = graph.values()[v].producer;
      if (p >= 0 && !ops[p].module.empty()) {
        last_layer = ops[p].module;
        last_is_slot = slot_of_op.count(p) > 0;
      }
    }
  }
};

PostTrainLinearQuantizer::PostTrainLinearQuantizer(PostTrainOptions options,
                                                   torch::nn::Module& model,
                                                   std::vector<int64_t> input_shape,
                                                   Forward forward)
    : options_(std::move(options)), impl_(std::make_unique<Impl>()) {
  impl_->model = &model;
  impl_->forward = forward;
  const ModuleMap modules = float_modules(model);
  std::vector<std::string> warnings;
  resolve_quant_bits(options_.quant, model, &warnings);  // overrides matching nothing: errors
  const auto graph = graph::SummaryGraph::build(model, input_shape, forward);
  impl_->find_layers(graph, modules, options_);
  impl_->find_producers(graph);
  impl_->find_inputs_and_ends(graph);
}

PostTrainLinearQuantizer::~PostTrainLinearQuantizer() = default;

QuantStats PostTrainLinearQuantizer::calibrate(
    const std::function<void(const Forward&)>& run_batches) {
  QuantStats stats;
  if (!impl_->first_layer.empty()) stats.at(impl_->first_layer);
  for (auto& s : impl_->slots) {
    auto slot = PtqSlot(s.act, s.name);
    slot->stats_ = &stats;
    slot->pass_ = &impl_->pass;
    s.act->replace(torch::nn::AnyModule(slot));
  }
  auto restore = [&] {
    for (auto& s : impl_->slots) s.act->restore();
  };
  Forward observed = [&](const at::Tensor& x) {
    if (!impl_->first_layer.empty()) stats.at(impl_->first_layer).inputs[0].update(x, impl_->pass);
    at::Tensor y = impl_->forward(x);
    if (!impl_->last_layer.empty()) {
      auto& l = stats.at(impl_->last_layer);
      if (!l.output) l.output = QuantStatsRecord{};
      l.output->update(y, impl_->pass);
    }
    return y;
  };
  try {
    TrainModeGuard eval(*impl_->model, /*train=*/false);
    at::NoGradGuard no_grad;
    for (int pass : {1, 2}) {
      impl_->pass = pass;
      run_batches(observed);
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  for (const auto& name : stats.order) {
    const auto& l = stats.layers.at(name);
    if ((l.output && l.output->total_numel == 0) ||
        (l.inputs.count(0) && l.inputs.at(0).total_numel == 0))
      throw InputError("calibration saw no data for layer " + name + " (no calibration batches?)");
  }
  return stats;
}

std::vector<std::string> PostTrainLinearQuantizer::required_stats() const {
  std::vector<std::string> out;
  for (const auto& l : impl_->layers)
    if (l.reads_model_input && l.settings.bits.activations != QuantBits::kFloat)
      out.push_back(l.name + ".inputs.0");
  for (const auto& s : impl_->slots) {
    if (s.settings.bits.activations != QuantBits::kFloat) out.push_back(s.name + ".output");
    if (!s.producer.empty()) {
      out.push_back(s.name + ".inputs.0");
      if (s.act->options().kind() == ActivationKind::kReLU) out.push_back(s.name + ".output");
    }
  }
  if (!impl_->last_layer.empty() && !impl_->last_is_slot &&
      options_.settings_for(impl_->last_layer).bits.activations != QuantBits::kFloat)
    out.push_back(impl_->last_layer + ".output");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

/// The statistics prepare() reads, each named with the source and the layer when it is missing.
class StatsReader {
 public:
  StatsReader(const QuantStats& stats, const std::string& source, LinearQuantMode mode)
      : stats_(stats), source_(source), mode_(mode) {}

  const QuantStatsRecord& record(const std::string& layer, bool output) const {
    const LayerQuantStats* l = stats_.find(layer);
    const QuantStatsRecord* r = nullptr;
    if (l && output && l->output) r = &*l->output;
    if (l && !output && l->inputs.count(0)) r = &l->inputs.at(0);
    if (!r)
      throw InputError(source_ + " has no statistics of layer " + layer +
                       (output ? " (output)" : " (inputs.0)") +
                       ", which post-training quantization needs");
    return *r;
  }

  ActQuant quant(const std::string& layer, const QuantStatsRecord& r,
                 const PtqLayerSettings& s) const {
    if (s.clip == ClipMode::kNStd && s.bits.activations != QuantBits::kFloat && std::isnan(r.std))
      throw InputError(source_ + " has no std of layer " + layer + ", which clip_acts N_STD needs");
    return act_quant_from_stats(r, s.bits.activations, mode_, s.clip, s.clip_n_stds);
  }

  const std::string& source() const { return source_; }

 private:
  const QuantStats& stats_;
  const std::string& source_;
  LinearQuantMode mode_;
};

/// The statistics a slot's producer is quantized with: the slot's input, or (Distiller's
/// _apply_activation_stats_fusions) a ReLU's output range, Tanh's and Sigmoid's input range
/// clipped to ±4 / ±6.
QuantStatsRecord fused_input_stats(const StatsReader& reader, const Slot& s) {
  QuantStatsRecord r = reader.record(s.name, false);
  const auto kind = s.act->options().kind();
  if (kind == ActivationKind::kReLU) r = reader.record(s.name, true);
  if (kind == ActivationKind::kTanh || kind == ActivationKind::kSigmoid) {
    const double sat = kind == ActivationKind::kTanh ? 4.0 : 6.0;
    auto clip = [&](double v) { return std::min(sat, std::max(-sat, v)); };
    r.min = clip(r.min);
    r.max = clip(r.max);
    r.avg_min = clip(r.avg_min);
    r.avg_max = clip(r.avg_max);
  }
  return r;
}

/// Folds layer `l`'s batch norm into its weight `w` and bias `b`: the folded bias goes to the
/// norm's bias and the norm becomes the identity. Returns the bias to quantize (the norm's).
at::Tensor* fold_batch_norm(const Layer& l, at::Tensor& w, at::Tensor* b) {
  auto& bn = *l.bn_module;
  const double eps = bn.options.eps();
  const at::Tensor g = bn.weight.defined() ? bn.weight.detach() : torch::ones_like(bn.running_mean);
  const at::Tensor beta = bn.bias.defined() ? bn.bias.detach() : torch::zeros_like(bn.running_mean);
  const at::Tensor factor = g / (bn.running_var + eps).sqrt();
  std::vector<int64_t> view(w.dim(), 1);
  view[0] = -1;
  w.mul_(factor.reshape(view));
  at::Tensor folded =
      ((b ? b->detach() : torch::zeros_like(bn.running_mean)) - bn.running_mean) * factor + beta;
  if (b) b->zero_();
  if (bn.weight.defined()) bn.weight.fill_(1);
  bn.running_mean.zero_();
  bn.running_var.fill_(1.0 - eps);
  if (!bn.bias.defined())
    throw InputError("batch norm " + l.bn + " has no bias to hold the folded bias of " + l.name);
  bn.bias.copy_(folded);
  return &bn.bias;
}

/// With bias_correction: moves the mean shift the weights' rounding causes on the layer's
/// output (at its input's per-channel means) into its bias.
void correct_bias(Layer& l, const at::Tensor& w_float, const at::Tensor& w, at::Tensor* b,
                  const StatsReader& reader) {
  const QuantStatsRecord* in = nullptr;
  if (l.reads_model_input) in = &reader.record(l.name, false);
  if (!l.input_slot.empty()) in = &reader.record(l.input_slot, true);
  if (in && in->channel_mean.empty())
    throw InputError(reader.source() + " has no channel_mean of the input of layer " + l.name +
                     ", which bias_correction needs (calibrate again without "
                     "--qe-stats-file, or set bias_correction: False)");
  if (!in || !b) return;
  const at::Tensor shift = weight_rounding_shift(w_float - w, in->channel_mean);
  if (shift.defined()) {
    b->add_(shift.to(b->scalar_type()));
    l.bias_shift = shift.abs().max().item<double>();
  }
}

/// Puts a quantizing slot in every activation: its output quantized by its own statistics, its
/// input (where a weight layer produces it) by its producer's settings. Returns each slot's
/// output quantization.
std::map<std::string, ActQuant> install_slots(std::vector<Slot>& slots,
                                              const std::vector<Layer>& layers,
                                              std::map<std::string, PtqSlot>& installed,
                                              const StatsReader& reader) {
  std::map<std::string, const Layer*> by_name;
  for (const auto& l : layers) by_name[l.name] = &l;
  std::map<std::string, ActQuant> slot_out;
  for (auto& s : slots) {
    auto slot = PtqSlot(s.act, s.name);
    if (s.settings.bits.activations != QuantBits::kFloat)
      slot->out_ = reader.quant(s.name, reader.record(s.name, true), s.settings);
    if (!s.producer.empty())
      slot->in_ =
          reader.quant(s.name, fused_input_stats(reader, s), by_name.at(s.producer)->settings);
    slot_out[s.name] = slot->out_;
    s.act->replace(torch::nn::AnyModule(slot));
    installed.insert_or_assign(s.name, slot);
  }
  return slot_out;
}

/// Folds a weight layer's batch norm, quantizes its weights (correcting its bias for their
/// rounding when asked) and, when its input's scale is known, its bias.
void quantize_layer(Layer& l, const PostTrainOptions& options, const ActQuant& input_q,
                    const StatsReader& reader, const std::map<std::string, ActQuant>& slot_out) {
  at::Tensor* w = weight_of(*l.module);
  at::Tensor* b = bias_of(*l.module);
  if (l.bn_module) b = fold_batch_norm(l, *w, b);
  if (l.settings.bits.weights == QuantBits::kFloat) return;
  const at::Tensor w_float = options.bias_correction ? w->detach().clone() : at::Tensor();
  w->copy_(quantize_weight_ptq(*w, l.settings.bits.weights, options.mode_weights,
                               l.settings.per_channel_wts, &l.w_scale));
  if (options.bias_correction) correct_bias(l, w_float, *w, b, reader);
  const auto in = slot_out.find(l.input_slot);
  if (!l.input_slot.empty() && in != slot_out.end() && in->second.enabled())
    l.input_scale = in->second.scale;
  if (l.reads_model_input && input_q.enabled()) l.input_scale = input_q.scale;
  if (b && l.input_scale && options.quant.bits.bias != QuantBits::kFloat) {
    b->copy_(quantize_bias_ptq(*b, *l.input_scale, l.w_scale, options.quant.bits.bias));
    l.bias_quantized = true;
  }
}

}  // namespace

void PostTrainLinearQuantizer::prepare(const QuantStats& stats, const std::string& source,
                                       Logger* logger) {
  if (impl_->prepared) throw std::logic_error("PostTrainLinearQuantizer::prepare called twice");
  impl_->prepared = true;
  const StatsReader reader(stats, source, options_.mode_activations);
  for (const auto& req : required_stats()) {
    const bool out = req.size() > 7 && req.compare(req.size() - 7, 7, ".output") == 0;
    reader.record(req.substr(0, req.size() - (out ? 7 : 9)), out);
  }
  // Model input, as its first layer's input.
  for (const auto& l : impl_->layers)
    if (l.reads_model_input && l.settings.bits.activations != QuantBits::kFloat)
      impl_->input_q = reader.quant(l.name, reader.record(l.name, false), l.settings);
  const auto slot_out = install_slots(impl_->slots, impl_->layers, impl_->installed, reader);
  at::NoGradGuard no_grad;
  for (auto& l : impl_->layers) quantize_layer(l, options_, impl_->input_q, reader, slot_out);
  if (!impl_->last_layer.empty() && !impl_->last_is_slot) {
    const auto s = options_.settings_for(impl_->last_layer);
    if (s.bits.activations != QuantBits::kFloat)
      impl_->output_q = reader.quant(impl_->last_layer, reader.record(impl_->last_layer, true), s);
  }
  if (!logger) return;
  for (const auto& w : options_.warnings) logger->warn(w);
  int64_t nq = 0;
  for (const auto& l : impl_->layers) nq += l.settings.bits.weights != QuantBits::kFloat;
  logger->info("post-training quantization (" + options_.mode_label() + ", clip_acts " +
               clip_name(options_.clip_acts) + "): " + std::to_string(nq) + " of " +
               std::to_string(impl_->layers.size()) + " conv/linear layers quantized, " +
               std::to_string(impl_->slots.size()) + " activations" +
               (options_.bias_correction ? ", biases corrected for the weights' rounding" : ""));
}

at::Tensor PostTrainLinearQuantizer::forward(const at::Tensor& x) const {
  return impl_->output_q.apply(impl_->forward(impl_->input_q.apply(x)));
}

nlohmann::json PostTrainLinearQuantizer::layers_json() const {
  nlohmann::json j = nlohmann::json::array();
  auto bits = [](int64_t b) { return b ? nlohmann::json(b) : nlohmann::json(nullptr); };
  for (const auto& l : impl_->layers) {
    nlohmann::json e = {
        {"layer", l.name},
        {"bits_weights", bits(l.settings.bits.weights)},
        {"per_channel_wts", l.settings.per_channel_wts},
        {"folded_bn", l.bn.empty() ? nlohmann::json(nullptr) : nlohmann::json(l.bn)},
        {"bias_on_accumulator_grid", l.bias_quantized}};
    if (l.input_scale) e["input_scale"] = *l.input_scale;
    if (l.bias_shift) e["bias_correction_max"] = *l.bias_shift;
    j.push_back(e);
  }
  for (const auto& [name, slot] : impl_->installed) {
    nlohmann::json e = {{"layer", name}};
    if (slot->out_.enabled()) e["output_scale"] = slot->out_.scale;
    if (slot->in_.enabled()) e["input_scale"] = slot->in_.scale;
    j.push_back(e);
  }
  return j;
}

std::unique_ptr<PostTrainLinearQuantizer> quantize_for_eval(
    const QuantizeEvalRequest& request, torch::nn::Module& model,
    const std::vector<int64_t>& input_shape, const PostTrainLinearQuantizer::Forward& forward,
    const std::function<void(const PostTrainLinearQuantizer::Forward&, int64_t)>& run_batches,
    const std::filesystem::path& out_dir, Logger& logger, nlohmann::json* info) {
  auto options = PostTrainOptions::load(request.schedule);
  const bool narrowed =
      request.weight_bits > 0 && options.quant.narrow_weights(8, request.weight_bits);
  const std::string stats_file =
      request.stats_file.empty() ? options.stats_file : request.stats_file;
  auto q = std::make_unique<PostTrainLinearQuantizer>(options, model, input_shape, forward);
  QuantStats stats;
  std::string source;
  nlohmann::json j = {
      {"schedule", request.schedule},
      {"quantizer", options.hyperparams()},
      {"label",
       "PTQ " + options.mode_label() +
           (narrowed ? ", weights " + std::to_string(request.weight_bits) + " bits" : "")}};
  if (narrowed) {
    j["int8_weights_narrowed"] = request.weight_bits;
    logger.info("post-training quantization: 8-bit weights narrowed to " +
                std::to_string(request.weight_bits) + " bits (--int8-weights)");
  }
  if (!stats_file.empty()) {
    stats = read_quant_stats(stats_file);
    source = "stats file " + stats_file;
    j["stats_file"] = stats_file;
    logger.info("post-training quantization: statistics from " + stats_file);
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    int pass = 0;
    int64_t done = 0;
    const int64_t n = request.calibration_batches;
    stats = q->calibrate([&](const PostTrainLinearQuantizer::Forward& f) {
      ++pass;
      done = 0;
      logger.info("calibration pass " + std::to_string(pass) + "/2 on up to " + std::to_string(n) +
                  " batches");
      // From 50 batches on, a line every tenth of them, as training logs its progress.
      const int64_t every = std::max<int64_t>(1, n / 10);
      run_batches(
          [&](const at::Tensor& x) {
            at::Tensor y = f(x);
            if (++done % every == 0 && done < n && n >= 50)
              logger.info("calibration pass " + std::to_string(pass) + "/2: batch " +
                          std::to_string(done) + "/" + std::to_string(n));
            return y;
          },
          n);
    });
    if (done < n)
      logger.warn("calibration ran on all " + std::to_string(done) +
                  " batches of the evaluation data (--calibration-batches " + std::to_string(n) +
                  ")");
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto path = out_dir / "quant_stats.yaml";
    write_quant_stats(stats, path);
    source = "calibration";
    j["calibration_batches"] = done;
    j["calibration_seconds"] = secs;
    j["stats_written"] = path.string();
    logger.info("calibration statistics of " + std::to_string(stats.order.size()) +
                " layers written to " + path.string() + " (" + format_duration(secs) + ")");
  }
  q->prepare(stats, source, &logger);
  j["layers"] = q->layers_json();
  if (info) *info = j;
  return q;
}

}  // namespace igb::compress
