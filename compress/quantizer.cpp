#include "compress/quantizer.h"

#include <ATen/core/ivalue.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <mutex>
#include <regex>
#include <set>
#include <stdexcept>

#include "compress/fake_quant.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

constexpr int64_t kMaxBits = 32;

// One bits key: absent → `fallback`, null → float, else 1 … kMaxBits.
int64_t read_bits(YamlReader& r, const std::string& key, int64_t fallback) {
  if (!r.has(key)) {
    r.node(key);  // marks it known
    return fallback;
  }
  const YAML::Node n = r.node(key);
  if (n.IsNull()) return QuantBits::kFloat;
  const auto bits = r.as<int64_t>(n, key);
  if (bits < 1 || bits > kMaxBits)
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " must be 1 to " +
                     std::to_string(kMaxBits) + " bits, or null for floating point; got " +
                     std::to_string(bits));
  return bits;
}

nlohmann::json bits_json(int64_t bits) {
  return bits == QuantBits::kFloat ? nlohmann::json(nullptr) : nlohmann::json(bits);
}

nlohmann::json bits_json(const QuantBits& b) {
  return {{"bits_activations", bits_json(b.activations)},
          {"bits_weights", bits_json(b.weights)},
          {"bits_bias", bits_json(b.bias)}};
}

std::regex compile(const QuantOverride& o) {
  try {
    return std::regex(o.pattern);
  } catch (const std::regex_error& e) {
    throw InputError((o.where.empty() ? std::string() : o.where + ": ") + "override '" + o.pattern +
                     "' is not a valid regular expression (" + e.what() + ")");
  }
}

// Reads `overrides` (current keys) or `bits_overrides` (legacy keys `acts`, `wts`, `bias`).
void read_overrides(YamlReader& r, const std::string& key, bool legacy,
                    std::optional<bool> quantize_bias, QuantizerOptions& o) {
  const YAML::Node n = r.node(key);
  if (!n || n.IsNull()) return;
  if (!n.IsMap())
    throw InputError(r.where(key) + ": " + r.path() + "." + key +
                     " must map module-name patterns to bit widths");
  const std::string acts = legacy ? "acts" : "bits_activations";
  const std::string wts = legacy ? "wts" : "bits_weights";
  const std::string bias = legacy ? "bias" : "bits_bias";
  for (const auto& kv : n) {
    QuantOverride entry;
    entry.pattern = yaml_scalar(r.file(), kv.first, r.path() + "." + key);
    entry.where = yaml_where(r.file(), kv.first);
    const std::string path = r.path() + "." + key + "." + entry.pattern;
    if (!kv.second.IsMap())
      throw InputError(entry.where + ": " + path + " must be a mapping of " + acts + ", " + wts +
                       ", " + bias);
    YamlReader e(kv.second, r.file(), path);
    entry.bits.activations = read_bits(e, acts, o.bits.activations);
    entry.bits.weights = read_bits(e, wts, o.bits.weights);
    // With the legacy quantize_bias, a module's bias follows its own weight bits.
    const int64_t bias_default =
        quantize_bias ? (*quantize_bias ? entry.bits.weights : QuantBits::kFloat) : o.bits.bias;
    entry.bits.bias = read_bits(e, bias, bias_default);
    e.finish();
    for (const auto& earlier : o.overrides)
      if (earlier.pattern == entry.pattern)
        throw InputError(entry.where + ": override '" + entry.pattern + "' is given twice");
    o.overrides.push_back(std::move(entry));
  }
}

bool has_weight_bits(const torch::nn::Module& m) {
  return dynamic_cast<const torch::nn::Conv2dImpl*>(&m) ||
         dynamic_cast<const torch::nn::Conv3dImpl*>(&m) ||
         dynamic_cast<const torch::nn::LinearImpl*>(&m) ||
         dynamic_cast<const torch::nn::EmbeddingImpl*>(&m);
}

bool is_relu_slot(const torch::nn::Module& m) {
  const auto* act = dynamic_cast<const ActivationImpl*>(&m);
  return act && act->options().kind() == ActivationKind::kReLU;
}

std::string mode_value(YamlReader& r, const YAML::Node& n, const std::string& key) {
  const auto mode = r.as<std::string>(n, key);
  if (mode == "SYMMETRIC" || mode == "SYMMETRIC_RESTRICTED") return "SYMMETRIC";
  if (mode == "ASYMMETRIC_UNSIGNED" || mode == "ASYMMETRIC_SIGNED")
    throw InputError(yaml_where(r.file(), n) + ": " + r.path() + "." + key + " " + mode +
                     " is not supported: TensorRT's Q/DQ quantization is symmetric; use SYMMETRIC");
  throw InputError(yaml_where(r.file(), n) + ": " + r.path() + "." + key + " '" + mode +
                   "' is not a mode; valid: SYMMETRIC, SYMMETRIC_RESTRICTED");
}

}  // namespace

QuantizerOptions QuantizerOptions::from_yaml(YamlReader& r, const QuantBits& defaults) {
  QuantizerOptions o;
  std::optional<bool> quantize_bias;
  if (r.has("quantize_bias")) {
    if (r.has("bits_bias"))
      throw InputError(r.where("quantize_bias") + ": " + r.path() +
                       " gives both bits_bias and Distiller's older quantize_bias; keep bits_bias");
    quantize_bias = r.get<bool>("quantize_bias");
  } else {
    r.node("quantize_bias");
  }
  o.bits.activations = read_bits(r, "bits_activations", defaults.activations);
  o.bits.weights = read_bits(r, "bits_weights", defaults.weights);
  if (quantize_bias) r.node("bits_bias");  // still a valid key in messages
  o.bits.bias = quantize_bias ? (*quantize_bias ? o.bits.weights : QuantBits::kFloat)
                              : read_bits(r, "bits_bias", defaults.bias);
  if (quantize_bias)
    o.warnings.push_back(r.where("quantize_bias") + ": " + r.path() +
                         ".quantize_bias is Distiller's older key; read as bits_bias: " +
                         (*quantize_bias ? "bits_weights (per override too)" : "null"));
  const bool legacy = r.has("bits_overrides");
  if (legacy && r.has("overrides"))
    throw InputError(r.where("bits_overrides") + ": " + r.path() +
                     " gives both overrides and Distiller's older bits_overrides; keep overrides");
  if (legacy)
    o.warnings.push_back(r.where("bits_overrides") + ": " + r.path() +
                         ".bits_overrides is Distiller's older key; its acts/wts/bias are read as "
                         "overrides with bits_activations/bits_weights/bits_bias");
  read_overrides(r, "overrides", false, quantize_bias, o);
  read_overrides(r, "bits_overrides", true, quantize_bias, o);
  for (const auto& e : o.overrides) compile(e);  // a bad pattern is an error at load
  return o;
}

nlohmann::json QuantizerOptions::hyperparams() const {
  nlohmann::json j = bits_json(bits);
  j["overrides"] = nlohmann::json::array();
  for (const auto& e : overrides) j["overrides"].push_back({{e.pattern, bits_json(e.bits)}});
  return j;
}

QuantBits QuantizerOptions::bits_for(const std::string& module) const {
  for (const auto& e : overrides)
    if (e.pattern == module) return e.bits;
  for (const auto& e : overrides)
    if (std::regex_match(module, compile(e))) return e.bits;
  return bits;
}

bool QuantizerOptions::narrow_weights(int64_t from, int64_t to) {
  if (to < 1 || to >= from || from > 8)
    throw std::invalid_argument("narrow_weights: needs 1 <= to < from <= 8");
  bool changed = false;
  auto narrow = [&](int64_t& b) {
    if (b < from || b > 8) return;
    b = to;
    changed = true;
  };
  narrow(bits.weights);
  for (auto& e : overrides) narrow(e.bits.weights);
  return changed;
}

DorefaOptions DorefaOptions::from_yaml(YamlReader& yaml) {
  DorefaOptions o;
  static_cast<QuantizerOptions&>(o) =
      QuantizerOptions::from_yaml(yaml, {32, 32, QuantBits::kFloat});
  return o;
}

nlohmann::json DorefaOptions::hyperparams() const { return QuantizerOptions::hyperparams(); }

PactOptions PactOptions::from_yaml(YamlReader& yaml) {
  PactOptions o;
  static_cast<QuantizerOptions&>(o) =
      QuantizerOptions::from_yaml(yaml, {32, 32, QuantBits::kFloat});
  o.act_clip_init_val = yaml.get<double>("act_clip_init_val", 8.0);
  if (!(o.act_clip_init_val > 0))
    throw InputError(yaml.where("act_clip_init_val") + ": " + yaml.path() +
                     ".act_clip_init_val must be > 0 (the initial clipping value)");
  const YAML::Node decay = yaml.node("act_clip_decay");
  if (decay && !decay.IsNull()) {
    o.act_clip_decay = yaml.as<double>(decay, "act_clip_decay");
    if (!(*o.act_clip_decay >= 0))
      throw InputError(yaml.where("act_clip_decay") + ": " + yaml.path() +
                       ".act_clip_decay must be >= 0 (a weight decay)");
  }
  return o;
}

nlohmann::json PactOptions::hyperparams() const {
  auto j = QuantizerOptions::hyperparams();
  j["act_clip_init_val"] = act_clip_init_val;
  j["act_clip_decay"] = act_clip_decay ? nlohmann::json(*act_clip_decay) : nlohmann::json(nullptr);
  return j;
}

QatRangeOptions QatRangeOptions::from_yaml(YamlReader& yaml) {
  QatRangeOptions o;
  static_cast<QuantizerOptions&>(o) = QuantizerOptions::from_yaml(yaml, {32, 32, 32});
  const YAML::Node mode = yaml.node("mode");
  if (mode && mode.IsMap()) {
    YamlReader m(mode, yaml.file(), yaml.path() + ".mode");
    for (const char* key : {"activations", "weights"})
      if (m.has(key)) mode_value(m, m.node(key), key);
    m.finish();
  } else if (mode && !mode.IsNull()) {
    mode_value(yaml, mode, "mode");
  }
  o.ema_decay = yaml.get<double>("ema_decay", 0.999);
  if (!(o.ema_decay >= 0 && o.ema_decay < 1))
    throw InputError(yaml.where("ema_decay") + ": " + yaml.path() + ".ema_decay must be in [0, 1)");
  o.per_channel_wts = yaml.get<bool>("per_channel_wts", false);
  o.quantize_inputs = yaml.get<bool>("quantize_inputs", true);
  const YAML::Node inputs = yaml.node("num_bits_inputs");
  o.num_bits_inputs = (inputs && !inputs.IsNull())
                          ? read_bits(yaml, "num_bits_inputs", o.bits.activations)
                          : o.bits.activations;
  return o;
}

nlohmann::json QatRangeOptions::hyperparams() const {
  auto j = QuantizerOptions::hyperparams();
  j["mode"] = "SYMMETRIC";
  j["ema_decay"] = ema_decay;
  j["per_channel_wts"] = per_channel_wts;
  j["quantize_inputs"] = quantize_inputs;
  j["num_bits_inputs"] = bits_json(num_bits_inputs);
  return j;
}

std::map<std::string, QuantBits> resolve_quant_bits(const QuantizerOptions& options,
                                                    const torch::nn::Module& model,
                                                    std::vector<std::string>* warnings) {
  std::map<std::string, QuantBits> out;
  std::vector<std::string> names;
  std::set<std::string> changeable;
  for (const auto& item : model.named_modules()) {
    const auto& m = *item.value();
    QuantBits b = options.bits_for(item.key());
    if (!has_weight_bits(m)) b.weights = b.bias = QuantBits::kFloat;
    out[item.key()] = b;
    names.push_back(item.key());
    if (has_weight_bits(m) || is_relu_slot(m)) changeable.insert(item.key());
  }
  for (const auto& e : options.overrides) {
    const std::regex re = compile(e);
    bool matched = false, useful = false;
    for (const auto& n : names) {
      if (n != e.pattern && !std::regex_match(n, re)) continue;
      matched = true;
      useful = useful || changeable.count(n) != 0;
    }
    const std::string at = e.where.empty() ? std::string() : e.where + ": ";
    if (!matched)
      throw InputError(at + "override '" + e.pattern +
                       "' matches no module of the model; closest module names: " +
                       join(closest_names(e.pattern, names)));
    if (!useful && warnings)
      warnings->push_back(at + "override '" + e.pattern +
                          "' matches only modules a quantizer leaves unchanged (no weight layer "
                          "or ReLU)");
  }
  return out;
}

nlohmann::json read_quantizer_options(const std::string& cls, YamlReader& yaml,
                                      const torch::nn::Module& model,
                                      std::vector<std::string>* warnings) {
  auto finish = [&](const QuantizerOptions& o, nlohmann::json j) {
    if (warnings) warnings->insert(warnings->end(), o.warnings.begin(), o.warnings.end());
    nlohmann::json bits = nlohmann::json::object();
    for (const auto& [name, b] : resolve_quant_bits(o, model, warnings))
      if (b != QuantBits{}) bits[name] = bits_json(b);
    j["class"] = cls;
    j["bits"] = bits;
    return j;
  };
  if (cls == "DorefaQuantizer") {
    const auto o = DorefaOptions::from_yaml(yaml);
    return finish(o, o.hyperparams());
  }
  if (cls == "PACTQuantizer") {
    const auto o = PactOptions::from_yaml(yaml);
    return finish(o, o.hyperparams());
  }
  if (cls == "QuantAwareTrainRangeLinearQuantizer") {
    const auto o = QatRangeOptions::from_yaml(yaml);
    return finish(o, o.hyperparams());
  }
  throw InputError(yaml.where() + ": the keys of quantizer class " + cls + " are not known");
}

namespace {

bool is_conv_transpose(const torch::nn::Module& m) {
  return dynamic_cast<const torch::nn::ConvTranspose1dImpl*>(&m) ||
         dynamic_cast<const torch::nn::ConvTranspose2dImpl*>(&m) ||
         dynamic_cast<const torch::nn::ConvTranspose3dImpl*>(&m) ||
         dynamic_cast<const torch::nn::Conv1dImpl*>(&m);
}

std::shared_ptr<torch::nn::Module> slot_replacement(const ActivationImpl& act) {
  for (const auto& item : act.named_children())
    if (item.key() == "replacement") return item.value();
  return nullptr;
}

std::string list_or_none(const std::vector<std::string>& names) {
  return names.empty() ? std::string("none") : join(names);
}

}  // namespace

void Quantizer::prepare_params(const std::string& name, torch::nn::Module& module,
                               const QuantBits& b, std::vector<std::string>& done) {
  QuantBits t;
  // Held here: find() points into the dictionary, so a temporary one would leave it dangling.
  const auto own_params = module.named_parameters(false);
  for (const char* param : {"weight", "bias"}) {
    const int64_t n = std::string(param) == "weight" ? b.weights : b.bias;
    const auto* p = own_params.find(param);
    if (n == QuantBits::kFloat || !p || !p->defined()) continue;
    if (n < min_weight_bits())
      throw InputError("quantizer " + name_ + " (" + class_name() + "): " + name + "." + param +
                       " gets " + std::to_string(n) + " bits; this class needs at least " +
                       std::to_string(min_weight_bits()));
    try {
      params_.push_back(QuantizedParam::prepare(module, param, n, method(), per_channel()));
    } catch (const InputError& e) {
      // A model prepared already (rebuilt from a checkpoint) whose bits differ.
      throw InputError("quantizer " + name_ + " (" + class_name() + "): layer " + name + ": " +
                       e.what());
    }
    (std::string(param) == "weight" ? t.weights : t.bias) = n;
    done.push_back(name + "." + param + " " + std::to_string(n) + " bits");
  }
  targets_[name] = t;
}

void Quantizer::prepare_activation(const std::string& name, ActivationImpl& act, int64_t bits,
                                   std::vector<std::string>& done) {
  if (bits < min_activation_bits())
    throw InputError("quantizer " + name_ + " (" + class_name() + "): " + name + " gets " +
                     std::to_string(bits) + " activation bits; this class needs at least " +
                     std::to_string(min_activation_bits()));
  if (act.replaced()) {
    auto current = slot_replacement(act);
    if (!current || !adopts_activation(*current, bits))
      throw InputError("quantizer " + name_ + " (" + class_name() + "): the activation " + name +
                       " is already replaced by another module (activation statistics or a "
                       "different quantizer); a schedule cannot both rank activations and "
                       "quantize them");
    activations_[name] = current;
  } else {
    act.replace(make_activation(name, bits));
    activations_[name] = slot_replacement(act);
  }
  targets_[name].activations = bits;
  done.push_back(name + " activations " + std::to_string(bits) + " bits");
}

void Quantizer::log_prepared(Logger& logger, const std::vector<std::string>& quantized,
                             const std::vector<std::string>& float_acts,
                             const std::vector<std::string>& float_weights) const {
  logger.info("quantizer " + name_ + " (" + class_name() + "): " + list_or_none(quantized));
  bool unrounded = false;
  for (const auto& [n, t] : targets_)
    unrounded = unrounded || std::max({t.activations, t.weights, t.bias}) > kMaxRoundedBits;
  if (unrounded)
    logger.info("quantizer " + name_ + ": widths above " + std::to_string(kMaxRoundedBits) +
                " bits (Distiller's default is 32) are finer than float32 resolution, so only "
                "their clamp and normalisation apply, not the rounding");
  if (!float_acts.empty())
    logger.info("quantizer " + name_ + ": activations left in floating point (" + class_name() +
                " replaces ReLU only): " + join(float_acts));
  if (!float_weights.empty())
    logger.info("quantizer " + name_ +
                ": weights left in floating point (Distiller quantizes Conv2d, Conv3d, Linear "
                "and Embedding weights only): " +
                join(float_weights));
}

void Quantizer::prepare_model(torch::nn::Module& model, Logger* logger) {
  const auto bits = resolve_quant_bits(options_, model, nullptr);
  targets_.clear();
  params_.clear();
  activations_.clear();
  std::vector<std::string> quantized, float_acts, float_weights;
  for (const auto& item : model.named_modules()) {
    const std::string& name = item.key();
    auto& module = *item.value();
    const QuantBits b = bits.at(name);
    if (b.weights != QuantBits::kFloat || b.bias != QuantBits::kFloat)
      prepare_params(name, module, b, quantized);
    else if (is_conv_transpose(module) && !module.parameters(false).empty())
      float_weights.push_back(name);
    auto* act = dynamic_cast<ActivationImpl*>(&module);
    if (!act || b.activations == QuantBits::kFloat) continue;
    if (act->options().kind() != ActivationKind::kReLU)
      float_acts.push_back(name + " (" + activation_name(act->options().kind()) + ")");
    else
      prepare_activation(name, *act, b.activations, quantized);
  }
  for (auto& line : prepare_more(model)) quantized.push_back(std::move(line));
  if (logger) log_prepared(*logger, quantized, float_acts, float_weights);
}

void Quantizer::before_step() {
  for (auto& p : params_) p.before_step();
}

void Quantizer::after_step() {
  for (auto& p : params_) p.after_step();
}

nlohmann::json Quantizer::bits_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, b] : targets_) out[name] = compress::bits_json(b);
  return out;
}

void Quantizer::save_state(torch::serialize::OutputArchive& archive) const {
  const nlohmann::json state = {{"hyperparams", hyperparams()}, {"bits", bits_json()}};
  archive.write("quantizer", c10::IValue(state.dump()));
}

void Quantizer::load_state(torch::serialize::InputArchive& archive) {
  c10::IValue v;
  if (!archive.try_read("quantizer", v))
    throw InputError("quantizer " + name_ + ": the checkpoint holds no quantizer state");
  const auto saved = nlohmann::json::parse(v.toStringRef());
  const nlohmann::json now = {{"hyperparams", hyperparams()}, {"bits", bits_json()}};
  if (saved != now)
    throw InputError("quantizer " + name_ + ": the checkpoint was quantized as " + saved.dump() +
                     ", this schedule quantizes as " + now.dump());
}

Registry<QuantizerSpec>& quantizer_registry() {
  static Registry<QuantizerSpec> r("quantizer class");
  return r;
}

void register_builtin_quantizers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = quantizer_registry();
    r.add("DorefaQuantizer", {make_dorefa_quantizer},
          "DoReFa-Net weights and activations (Zhou et al. 2016)");
    r.add("PACTQuantizer", {make_pact_quantizer},
          "PACT, learned activation clipping (Choi et al. 2018)");
    r.add("WRPNQuantizer", {},
          "WRPN, wide reduced-precision networks (Mishra et al. 2017); recognised in schedules, "
          "not available in this build");
    r.add("QuantAwareTrainRangeLinearQuantizer", {make_qat_range_quantizer},
          "range-based linear quantization-aware training");
    r.freeze();
  });
}

}  // namespace igb::compress
