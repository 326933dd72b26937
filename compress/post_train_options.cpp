#include "compress/post_train_options.h"

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <regex>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/yaml_reader.h"

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

}  // namespace

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
  const YAML::Node root = load_yaml_file(file);
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

}  // namespace igb::compress
