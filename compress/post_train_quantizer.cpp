#include "compress/post_train_quantizer.h"

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "compress/fake_quant.h"
#include "compress/yaml_reader.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/progress.h"
#include "core/train_mode_guard.h"
#include "tools/graph/summary_graph.h"

namespace igb::compress {

namespace {

LinearQuantMode mode_value(YamlReader& r, const YAML::Node& n, const std::string& key) {
  const auto s = r.as<std::string>(n, key);
  if (s == "SYMMETRIC" || s == "SYMMETRIC_RESTRICTED") return LinearQuantMode::kSymmetric;
  if (s == "ASYMMETRIC_UNSIGNED") return LinearQuantMode::kAsymmetricUnsigned;
  if (s == "ASYMMETRIC_SIGNED") return LinearQuantMode::kAsymmetricSigned;
  throw InputError(r.where(key) + ": " + r.path() + "." + key + " '" + s +
                   "' is not a mode; valid: SYMMETRIC, SYMMETRIC_RESTRICTED, ASYMMETRIC_UNSIGNED, "
                   "ASYMMETRIC_SIGNED");
}

// `mode`: one name for activations and weights, or {activations: NAME, weights: NAME}.
std::pair<LinearQuantMode, LinearQuantMode> parse_mode(YamlReader& r, const std::string& key) {
  const YAML::Node n = r.node(key);
  if (!n || n.IsNull()) return {LinearQuantMode::kSymmetric, LinearQuantMode::kSymmetric};
  if (n.IsMap()) {
    YamlReader m(n, r.file(), r.path() + "." + key);
    if (!m.has("activations")) throw m.missing("activations");
    if (!m.has("weights")) throw m.missing("weights");
    const auto acts = mode_value(m, m.node("activations"), "activations");
    const auto wts = mode_value(m, m.node("weights"), "weights");
    m.finish();
    return {acts, wts};
  }
  const auto v = mode_value(r, n, key);
  return {v, v};
}

std::optional<ClipMode> parse_clip(YamlReader& r, const std::string& key) {
  const YAML::Node n = r.node(key);
  if (!n || n.IsNull()) return std::nullopt;
  const auto s = r.as<std::string>(n, key);
  if (s == "NONE") return ClipMode::kNone;
  if (s == "AVG") return ClipMode::kAvg;
  if (s == "N_STD") return ClipMode::kNStd;
  throw InputError(r.where(key) + ": " + r.path() + "." + key + " '" + s +
                   "' is not a clip mode; valid: NONE, AVG, N_STD");
}

std::optional<double> parse_n_stds(YamlReader& r, const std::string& key) {
  const YAML::Node n = r.node(key);
  if (!n || n.IsNull()) return std::nullopt;
  const double v = r.as<double>(n, key);
  if (!(v > 0))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " must be > 0, got " +
                     std::to_string(v));
  return v;
}

int64_t parse_bits(YamlReader& r, const std::string& key, int64_t fallback) {
  if (!r.has(key)) {
    r.node(key);
    return fallback;
  }
  const YAML::Node n = r.node(key);
  if (n.IsNull()) return QuantBits::kFloat;
  const auto bits = r.as<int64_t>(n, key);
  if (bits < 2 || bits > 32)
    throw InputError(r.where(key) + ": " + r.path() + "." + key +
                     " must be 2 to 32 bits, or null for floating point; got " +
                     std::to_string(bits));
  return bits;
}

// Keys Distiller's constructor takes that this implementation refuses unless they are off.
void refuse_unless_off(YamlReader& r, const std::string& key, std::vector<std::string>& warnings) {
  const YAML::Node n = r.node(key);
  if (!n || n.IsNull()) return;
  if (n.IsScalar() && (n.as<std::string>() == "False" || n.as<std::string>() == "false")) {
    warnings.push_back(r.where(key) + ": " + r.path() + "." + key + ": false is the default");
    return;
  }
  throw InputError(r.where(key) + ": " + r.path() + "." + key +
                   " is not supported by this PostTrainLinearQuantizer (remove it or set it to " +
                   (key == "fp16" ? "false" : "null") + ")");
}

int64_t match_override(const std::vector<QuantOverride>& overrides, const std::string& module) {
  for (size_t i = 0; i < overrides.size(); ++i)
    if (overrides[i].pattern == module) return static_cast<int64_t>(i);
  for (size_t i = 0; i < overrides.size(); ++i)
    if (std::regex_match(module, std::regex(overrides[i].pattern))) return static_cast<int64_t>(i);
  return -1;
}

std::string size_string(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + ")";
}

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

}  // namespace

std::string mode_name(LinearQuantMode mode) {
  switch (mode) {
    case LinearQuantMode::kSymmetric:
      return "SYMMETRIC";
    case LinearQuantMode::kAsymmetricUnsigned:
      return "ASYMMETRIC_UNSIGNED";
    case LinearQuantMode::kAsymmetricSigned:
      return "ASYMMETRIC_SIGNED";
  }
  return "?";
}

std::string clip_name(ClipMode clip) {
  switch (clip) {
    case ClipMode::kNone:
      return "NONE";
    case ClipMode::kAvg:
      return "AVG";
    case ClipMode::kNStd:
      return "N_STD";
  }
  return "?";
}

// ---- statistics ----

void QuantStatsRecord::update(const at::Tensor& tensor, int pass) {
  at::NoGradGuard no_grad;
  const at::Tensor act = tensor.detach().to(at::kDouble).reshape({tensor.size(0), -1});
  const int64_t numel = act.numel();
  if (pass == 2) {
    const at::Tensor d = act - mean;
    sq_sum += d.square().sum().item<double>();
    abs_sum += d.abs().sum().item<double>();
    pass2_numel += numel;
    std = std::sqrt(sq_sum / static_cast<double>(pass2_numel));
    b = abs_sum / static_cast<double>(pass2_numel);
    return;
  }
  // Per-sample minima and maxima, or the batch's when each sample is one value.
  const int64_t dim = numel == act.size(0) ? 0 : 1;
  const at::Tensor mins = std::get<0>(act.min(dim));
  const at::Tensor maxs = std::get<0>(act.max(dim));
  min = std::min(min, mins.min().item<double>());
  max = std::max(max, maxs.max().item<double>());
  const int64_t k = mins.numel();
  const double s = static_cast<double>(samples);
  avg_min = (avg_min * s + mins.sum().item<double>()) / (s + static_cast<double>(k));
  avg_max = (avg_max * s + maxs.sum().item<double>()) / (s + static_cast<double>(k));
  samples += k;
  const double n = static_cast<double>(total_numel);
  mean = (mean * n + act.sum().item<double>()) / (n + static_cast<double>(numel));
  total_numel += numel;
  if (tensor.dim() >= 2) {
    const int64_t c = tensor.size(1);
    const at::Tensor per = tensor.detach().to(at::kDouble).transpose(0, 1).reshape({c, -1});
    const int64_t k2 = per.size(1);
    if (channel_mean.empty()) channel_mean.assign(static_cast<size_t>(c), 0.0);
    if (static_cast<int64_t>(channel_mean.size()) == c) {
      const at::Tensor sums = per.sum(1).contiguous();
      const double* sp = sums.data_ptr<double>();
      const double before = static_cast<double>(channel_numel);
      const double after = before + static_cast<double>(k2);
      for (int64_t i = 0; i < c; ++i)
        channel_mean[static_cast<size_t>(i)] =
            (channel_mean[static_cast<size_t>(i)] * before + sp[i]) / after;
      channel_numel += k2;
    }
  }
  if (shape.empty()) shape = size_string(tensor);
}

LayerQuantStats& QuantStats::at(const std::string& layer) {
  auto it = layers.find(layer);
  if (it == layers.end()) {
    order.push_back(layer);
    it = layers.emplace(layer, LayerQuantStats{}).first;
  }
  return it->second;
}

const LayerQuantStats* QuantStats::find(const std::string& layer) const {
  auto it = layers.find(layer);
  return it == layers.end() ? nullptr : &it->second;
}

namespace {

void emit_record(YAML::Emitter& e, const QuantStatsRecord& r) {
  e << YAML::BeginMap;
  e << YAML::Key << "min" << YAML::Value << r.min;
  e << YAML::Key << "max" << YAML::Value << r.max;
  e << YAML::Key << "avg_min" << YAML::Value << r.avg_min;
  e << YAML::Key << "avg_max" << YAML::Value << r.avg_max;
  e << YAML::Key << "mean" << YAML::Value << r.mean;
  e << YAML::Key << "std" << YAML::Value << r.std;
  e << YAML::Key << "b" << YAML::Value << r.b;
  e << YAML::Key << "shape" << YAML::Value << r.shape;
  e << YAML::Key << "total_numel" << YAML::Value << r.total_numel;
  if (!r.channel_mean.empty())
    e << YAML::Key << "channel_mean" << YAML::Value << YAML::Flow << r.channel_mean;
  e << YAML::EndMap;
}

QuantStatsRecord read_record(const YAML::Node& n, const std::string& file,
                             const std::string& path) {
  if (!n.IsMap())
    throw InputError(yaml_where(file, n) + ": " + path +
                     " must be a mapping of min, max, avg_min, avg_max, mean, std, b, shape");
  YamlReader r(n, file, path);
  QuantStatsRecord rec;
  rec.min = r.get<double>("min");
  rec.max = r.get<double>("max");
  rec.avg_min = r.get<double>("avg_min");
  rec.avg_max = r.get<double>("avg_max");
  rec.mean = r.get<double>("mean");
  // Older Distiller files have no std: N_STD clipping then refuses them.
  rec.std = r.get<double>("std", std::nan(""));
  rec.b = r.get<double>("b", 0.0);
  rec.shape = r.get<std::string>("shape", std::string());
  rec.total_numel = r.get<int64_t>("total_numel", int64_t{0});
  rec.channel_mean = r.get<std::vector<double>>("channel_mean", std::vector<double>{});
  r.finish();
  if (!(rec.min <= rec.max))
    throw InputError(r.where("min") + ": " + path + ".min is above its max");
  return rec;
}

}  // namespace

void write_quant_stats(const QuantStats& stats, const std::filesystem::path& file) {
  YAML::Emitter e;
  e.SetDoublePrecision(17);
  e << YAML::BeginMap;
  for (const auto& name : stats.order) {
    const auto& l = stats.layers.at(name);
    e << YAML::Key << name << YAML::Value << YAML::BeginMap;
    if (!l.inputs.empty()) {
      e << YAML::Key << "inputs" << YAML::Value << YAML::BeginMap;
      for (const auto& [i, r] : l.inputs) {
        e << YAML::Key << i << YAML::Value;
        emit_record(e, r);
      }
      e << YAML::EndMap;
    }
    if (l.output) {
      e << YAML::Key << "output" << YAML::Value;
      emit_record(e, *l.output);
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
  write_text_atomically(file, std::string(e.c_str()) + "\n");
}

QuantStats read_quant_stats(const std::filesystem::path& path) {
  const std::string file = path.string();
  if (!std::filesystem::is_regular_file(path))
    throw InputError("stats file " + file + " does not exist");
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(file + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML (" + e.msg +
                     ")");
  }
  if (!root.IsMap())
    throw InputError(file + ": a stats file maps layer names to {inputs, output} statistics");
  QuantStats stats;
  for (const auto& kv : root) {
    const std::string name = yaml_scalar(file, kv.first, "stats");
    if (!kv.second.IsMap())
      throw InputError(yaml_where(file, kv.first) + ": " + name +
                       " must be a mapping with inputs and output");
    YamlReader r(kv.second, file, name);
    auto& layer = stats.at(name);
    const YAML::Node inputs = r.node("inputs");
    if (inputs && !inputs.IsNull()) {
      if (!inputs.IsMap())
        throw InputError(r.where("inputs") + ": " + name + ".inputs must map input indices");
      for (const auto& in : inputs) {
        const std::string idx = yaml_scalar(file, in.first, name + ".inputs");
        int64_t i = -1;
        try {
          i = std::stoll(idx);
        } catch (const std::exception&) {
        }
        if (i < 0)
          throw InputError(yaml_where(file, in.first) + ": " + name + ".inputs key '" + idx +
                           "' is not an input index");
        layer.inputs[i] = read_record(in.second, file, name + ".inputs." + idx);
      }
    }
    const YAML::Node out = r.node("output");
    if (out && !out.IsNull()) layer.output = read_record(out, file, name + ".output");
    r.finish();
  }
  return stats;
}

// ---- arithmetic ----

at::Tensor ActQuant::apply(const at::Tensor& x) const {
  if (!enabled()) return x;
  return fake_quant_affine(x, scale, zero_point, bits);
}

ActQuant act_quant_from_stats(const QuantStatsRecord& r, int64_t bits, LinearQuantMode mode,
                              ClipMode clip, double n_stds) {
  ActQuant q;
  if (bits == QuantBits::kFloat) return q;
  q.bits = bits;
  float lo = static_cast<float>(clip == ClipMode::kAvg ? r.avg_min : r.min);
  float hi = static_cast<float>(clip == ClipMode::kAvg ? r.avg_max : r.max);
  if (clip == ClipMode::kNStd) {
    lo = std::max(lo, static_cast<float>(r.mean - n_stds * r.std));
    hi = std::min(hi, static_cast<float>(r.mean + n_stds * r.std));
  }
  if (mode == LinearQuantMode::kSymmetric) {
    const float n = static_cast<float>((int64_t{1} << (bits - 1)) - 1);
    float sat = std::max(std::fabs(lo), std::fabs(hi));
    if (sat == 0) sat = n;
    const float scale = n / sat;  // Distiller's scale, float32
    q.scale = 1.0 / static_cast<double>(scale);
    q.zero_point = int64_t{1} << (bits - 1);
    return q;
  }
  const float n = static_cast<float>((int64_t{1} << bits) - 1);
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  float diff = hi - lo;
  if (diff == 0) diff = n;
  const float scale = n / diff;
  q.scale = 1.0 / static_cast<double>(scale);
  q.zero_point = -static_cast<int64_t>(std::nearbyint(scale * lo));
  return q;
}

at::Tensor quantize_weight_ptq(const at::Tensor& w, int64_t bits, LinearQuantMode mode,
                               bool per_channel, at::Tensor* scale) {
  at::NoGradGuard no_grad;
  const at::Tensor wd = w.detach();
  if (mode == LinearQuantMode::kSymmetric) {
    at::Tensor s = symmetric_scale(wd, bits, per_channel);
    if (scale) *scale = s;
    return symmetric_fake_quant(wd, s, bits);
  }
  const bool per_ch = per_channel && (wd.dim() == 2 || wd.dim() == 4);
  at::Tensor s = asymmetric_scale(wd, bits, per_channel);
  const at::Tensor flat = per_ch ? wd.reshape({wd.size(0), -1}) : wd.reshape({1, -1});
  const at::Tensor lo = std::get<0>(flat.min(1)).clamp_max(0).to(at::kFloat);
  std::vector<int64_t> view(wd.dim(), 1);
  if (per_ch) view[0] = wd.size(0);
  const at::Tensor sv = s.to(wd.device()).reshape(view);
  const at::Tensor z = (-(lo.to(wd.device()) / s.to(wd.device()))).round().reshape(view);
  const double n = static_cast<double>((int64_t{1} << bits) - 1);
  const at::Tensor q = ((wd / sv).round() + z).clamp(0, n);
  if (scale) *scale = s;
  return ((q - z) * sv).to(wd.scalar_type());
}

at::Tensor quantize_bias_ptq(const at::Tensor& b, double input_scale, const at::Tensor& w_scale,
                             int64_t accum_bits) {
  at::NoGradGuard no_grad;
  const at::Tensor acc = (w_scale.to(b.device()).to(at::kFloat) * input_scale).reshape({-1});
  const double lim = std::ldexp(1.0, static_cast<int>(accum_bits - 1));
  return ((b.detach() / acc).round().clamp(-lim, lim - 1) * acc).to(b.scalar_type());
}

// ---- options ----

PostTrainOptions PostTrainOptions::from_yaml(YamlReader& r) {
  PostTrainOptions o;
  o.file = r.file();
  o.quant.bits.activations = parse_bits(r, "bits_activations", 8);
  o.quant.bits.weights = parse_bits(r, "bits_parameters", 8);
  o.quant.bits.bias = parse_bits(r, "bits_accum", 32);
  std::tie(o.mode_activations, o.mode_weights) = parse_mode(r, "mode");
  o.per_channel_wts = r.get<bool>("per_channel_wts", false);
  o.clip_acts = parse_clip(r, "clip_acts").value_or(ClipMode::kNone);
  o.clip_n_stds = parse_n_stds(r, "clip_n_stds");
  o.stats_file = r.get<std::string>("model_activation_stats", std::string());
  o.bias_correction = r.get<bool>("bias_correction", false);
  refuse_unless_off(r, "fp16", o.warnings);
  refuse_unless_off(r, "scale_approx_mult_bits", o.warnings);
  if (o.clip_acts == ClipMode::kNStd && !o.clip_n_stds)
    throw InputError(r.where("clip_acts") + ": " + r.path() +
                     ".clip_acts N_STD needs clip_n_stds (the number of standard deviations)");
  const YAML::Node ov = r.node("overrides");
  if (ov && !ov.IsNull()) {
    if (!ov.IsMap())
      throw InputError(r.where("overrides") + ": " + r.path() +
                       ".overrides must map module-name patterns to settings");
    for (const auto& kv : ov) {
      QuantOverride entry;
      entry.pattern = yaml_scalar(r.file(), kv.first, r.path() + ".overrides");
      entry.where = yaml_where(r.file(), kv.first);
      const std::string path = r.path() + ".overrides." + entry.pattern;
      try {
        std::regex check(entry.pattern);
      } catch (const std::regex_error& e) {
        throw InputError(entry.where + ": override '" + entry.pattern +
                         "' is not a valid regular expression (" + e.what() + ")");
      }
      for (const auto& earlier : o.quant.overrides)
        if (earlier.pattern == entry.pattern)
          throw InputError(entry.where + ": override '" + entry.pattern + "' is given twice");
      Extra extra;
      entry.bits = o.quant.bits;
      if (!kv.second.IsNull()) {
        if (!kv.second.IsMap())
          throw InputError(entry.where + ": " + path +
                           " must be a mapping of bits_activations, bits_weights, clip_acts, "
                           "clip_n_stds, per_channel_wts");
        YamlReader e(kv.second, r.file(), path);
        entry.bits.activations = parse_bits(e, "bits_activations", o.quant.bits.activations);
        entry.bits.weights = parse_bits(e, "bits_weights", o.quant.bits.weights);
        if (e.has("bits_bias")) {
          e.node("bits_bias");
          o.warnings.push_back(e.where("bits_bias") + ": " + path +
                               ".bits_bias has no effect: PostTrainLinearQuantizer puts biases "
                               "on the accumulator grid (bits_accum), as Distiller's does");
        }
        extra.clip = parse_clip(e, "clip_acts");
        extra.n_stds = parse_n_stds(e, "clip_n_stds");
        if (e.has("per_channel_wts")) extra.per_channel = e.get<bool>("per_channel_wts");
        e.finish();
        if (extra.clip == ClipMode::kNStd && !extra.n_stds && !o.clip_n_stds)
          throw InputError(e.where("clip_acts") + ": " + path +
                           ".clip_acts N_STD needs clip_n_stds");
      } else {
        entry.bits = {QuantBits::kFloat, QuantBits::kFloat, QuantBits::kFloat};
      }
      o.quant.overrides.push_back(std::move(entry));
      o.extras.push_back(extra);
    }
  }
  return o;
}

PostTrainOptions PostTrainOptions::load(const std::string& file) {
  if (!std::filesystem::is_regular_file(file))
    throw InputError("--quantize-eval: " + file + " does not exist");
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(file + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML (" + e.msg +
                     ")");
  }
  check_duplicate_keys(root, file);
  if (!root.IsMap() || !root["quantizers"] || !root["quantizers"].IsMap())
    throw InputError(file + ": needs a quantizers section with a PostTrainLinearQuantizer");
  std::vector<std::string> warnings;
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "quantizers" && key != "version")
      warnings.push_back(yaml_where(file, kv.first) + ": section '" + key +
                         "' is ignored by post-training quantization (only the quantizer is read)");
  }
  std::optional<PostTrainOptions> found;
  for (const auto& kv : root["quantizers"]) {
    const std::string name = yaml_scalar(file, kv.first, "quantizers");
    if (!kv.second.IsMap() || !kv.second["class"])
      throw InputError(yaml_where(file, kv.first) + ": quantizers." + name + " needs a class");
    const std::string cls = kv.second["class"].as<std::string>();
    if (cls != "PostTrainLinearQuantizer")
      throw InputError(yaml_where(file, kv.second["class"]) + ": quantizers." + name + " is a " +
                       cls + "; --quantize-eval needs class PostTrainLinearQuantizer");
    if (found)
      throw InputError(yaml_where(file, kv.first) + ": more than one PostTrainLinearQuantizer");
    YamlReader r(kv.second, file, "quantizers." + name);
    r.get<std::string>("class");
    found = from_yaml(r);
    r.finish();
  }
  if (!found) throw InputError(file + ": quantizers holds no PostTrainLinearQuantizer");
  found->warnings.insert(found->warnings.begin(), warnings.begin(), warnings.end());
  return *found;
}

nlohmann::json PostTrainOptions::hyperparams() const {
  auto bits = [](int64_t b) { return b ? nlohmann::json(b) : nlohmann::json(nullptr); };
  nlohmann::json j = {{"class", "PostTrainLinearQuantizer"},
                      {"bits_activations", bits(quant.bits.activations)},
                      {"bits_parameters", bits(quant.bits.weights)},
                      {"bits_accum", bits(quant.bits.bias)},
                      {"mode", mode_activations == mode_weights
                                   ? nlohmann::json(mode_name(mode_activations))
                                   : nlohmann::json({{"activations", mode_name(mode_activations)},
                                                     {"weights", mode_name(mode_weights)}})},
                      {"per_channel_wts", per_channel_wts},
                      {"clip_acts", clip_name(clip_acts)},
                      {"clip_n_stds", clip_n_stds ? nlohmann::json(*clip_n_stds) : nullptr},
                      {"bias_correction", bias_correction}};
  nlohmann::json ov = nlohmann::json::array();
  for (size_t i = 0; i < quant.overrides.size(); ++i) {
    const auto& e = quant.overrides[i];
    nlohmann::json v = {{"bits_activations", bits(e.bits.activations)},
                        {"bits_weights", bits(e.bits.weights)}};
    if (extras[i].clip) v["clip_acts"] = clip_name(*extras[i].clip);
    if (extras[i].n_stds) v["clip_n_stds"] = *extras[i].n_stds;
    if (extras[i].per_channel) v["per_channel_wts"] = *extras[i].per_channel;
    ov.push_back({{e.pattern, v}});
  }
  j["overrides"] = ov;
  return j;
}

std::string PostTrainOptions::mode_label() const {
  if (mode_activations == mode_weights) return mode_name(mode_activations);
  return "a:" + mode_name(mode_activations) + " w:" + mode_name(mode_weights);
}

PtqLayerSettings PostTrainOptions::settings_for(const std::string& module) const {
  PtqLayerSettings s;
  s.bits = quant.bits_for(module);
  s.clip = clip_acts;
  s.clip_n_stds = clip_n_stds.value_or(0);
  s.per_channel_wts = per_channel_wts;
  const int64_t i = match_override(quant.overrides, module);
  if (i >= 0) {
    const Extra& e = extras[static_cast<size_t>(i)];
    if (e.clip) s.clip = *e.clip;
    if (e.n_stds) s.clip_n_stds = *e.n_stds;
    if (e.per_channel) s.per_channel_wts = *e.per_channel;
  }
  return s;
}

// ---- the quantizer ----

namespace {

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
  void find_layers(const tools::SummaryGraph& graph, const ModuleMap& modules,
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
      if ((op.op_kind == tools::OpKind::kConv || op.op_kind == tools::OpKind::kLinear) &&
          is_weight_layer(*m)) {
        Layer l;
        l.name = op.module;
        l.module = m;
        l.settings = options.settings_for(l.name);
        const auto succ = graph.successors(op.id);
        if (succ.size() == 1 && ops[succ[0]].op_kind == tools::OpKind::kBatchNorm &&
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
  void find_producers(const tools::SummaryGraph& graph) {
    const auto& ops = graph.ops();
    for (auto& s : slots) {
      int op = -1;
      for (const auto& [id, name] : slot_of_op)
        if (name == s.name) op = id;
      const auto pred = graph.predecessors(op);
      if (pred.size() != 1) continue;
      int p = pred[0];
      if (ops[p].op_kind == tools::OpKind::kBatchNorm) {
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
  void find_inputs_and_ends(const tools::SummaryGraph& graph) {
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
  const auto graph = tools::SummaryGraph::build(model, input_shape, forward);
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
  const std::string stats_file =
      request.stats_file.empty() ? options.stats_file : request.stats_file;
  auto q = std::make_unique<PostTrainLinearQuantizer>(options, model, input_shape, forward);
  QuantStats stats;
  std::string source;
  nlohmann::json j = {{"schedule", request.schedule},
                      {"quantizer", options.hyperparams()},
                      {"label", "PTQ " + options.mode_label()}};
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
