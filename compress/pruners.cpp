#include "compress/pruners.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>

#include "compress/activation_pruners.h"
#include "compress/random_pruners.h"
#include "compress/splicing_pruner.h"
#include "core/yaml_reader.h"

namespace igb::compress {

double agp_target(double initial, double final_sparsity, int64_t epoch, const PolicyTiming& t) {
  const int64_t span = ((t.end - t.start - 1) / t.frequency) * t.frequency;
  if (span <= 0) return final_sparsity;
  const double progress = std::min(
      1.0, std::max(0.0, static_cast<double>(epoch - t.start) / static_cast<double>(span)));
  return final_sparsity + (initial - final_sparsity) * std::pow(1.0 - progress, 3);
}

void mask_groups(const ModelParams& params, MaskTable& masks, const std::string& weight,
                 GroupType group, const std::vector<int64_t>& pruned, const at::Tensor& w) {
  auto combine = [&](const std::string& name, const at::Tensor& m) {
    auto it = masks.find(name);
    masks[name] = it == masks.end() ? m : it->second * m;
  };
  const ChannelGroups* groups = params.channel_groups();
  const bool filters = group == GroupType::kFilters;
  if (filters && !groups)
    throw std::logic_error(
        "filter pruning of " + weight +
        " needs the model's channel groups: call CompressionScheduler::set_tracer() first");
  if (filters && groups->has(weight)) {
    // The whole channel group of each pruned filter: every tied filter and per-channel follower.
    std::map<std::string, at::Tensor> add;
    for (int64_t j : pruned)
      for (const auto& m : groups->members(weight, j)) {
        auto& mask = add[m.tensor];
        if (!mask.defined()) mask = torch::ones(params.at(m.tensor).sizes(), torch::kFloat32);
        mask.select(m.dim, m.index).zero_();
      }
    if (pruned.empty()) combine(weight, torch::ones(w.sizes(), torch::kFloat32));
    for (const auto& [name, m] : add) combine(name, m);
    return;
  }
  // Channels, a 2-D weight's columns (Distiller's Rows), and filters of a weight that writes no
  // channel group of its own (a grouped convolution): the weight alone.
  combine(weight, group_mask(w, group, pruned));
}

namespace {

double read_fraction(YamlReader& r, const std::string& key, const YAML::Node& n) {
  double v = r.as<double>(n, key);
  if (!(v >= 0 && v <= 1))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " = " + std::to_string(v) +
                     " is not in [0, 1]");
  return v;
}

/// A required key holding a fraction in [0, 1].
double fraction(YamlReader& r, const std::string& key) {
  double v = r.get<double>(key);
  if (!(v >= 0 && v <= 1))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " = " + std::to_string(v) +
                     " is not in [0, 1]");
  return v;
}

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

/// AGP prunes from initial_sparsity up to final_sparsity: Distiller asserts final > initial.
void check_agp_range(YamlReader& r, double initial, double final_sparsity) {
  if (!(initial < final_sparsity))
    throw InputError(r.where("initial_sparsity") + ": " + r.path() + ": initial_sparsity " +
                     number(initial) + " must be below final_sparsity " + number(final_sparsity) +
                     " (AGP raises sparsity from the one to the other)");
}

/// A {param or '*': value} map resolved against the model: '*' covers every parameter that is not
/// named explicitly, biases and norm terms included, as Distiller applies it to each of
/// named_parameters().
ParamValues per_param(YamlReader& r, const std::string& key, const ModelParams& params,
                      bool is_fraction) {
  YAML::Node n = r.required(key);
  if (!n.IsMap() || n.size() == 0)
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty mapping '" + key + "'");
  ParamValues out;
  double star = -1;
  for (const auto& kv : n) {
    const auto name =
        yaml_scalar(r.file(), kv.first, "a parameter name in " + r.path() + "." + key);
    double v = is_fraction ? read_fraction(r, key, kv.second) : r.as<double>(kv.second, key);
    if (name == "*")
      star = v;
    else
      out[params.resolve(name, yaml_where(r.file(), kv.first))] = v;
  }
  if (star >= 0)
    for (const auto& w : params.names())
      if (!out.count(w)) out[w] = star;
  return out;
}

std::vector<std::string> read_weights(YamlReader& r, const ModelParams& params) {
  YAML::Node n = r.required("weights");
  // One name given as a plain string, as Distiller accepts it.
  if (n && n.IsScalar() && !n.Scalar().empty())
    return {params.resolve(n.Scalar(), yaml_where(r.file(), n))};
  if (!n || !n.IsSequence() || n.size() == 0)
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty list 'weights'");
  std::vector<std::string> out;
  for (const auto& w : n) {
    if (!w.IsScalar()) throw r.wrong_type(w, "weights", "a parameter name");
    out.push_back(params.resolve(w.Scalar(), yaml_where(r.file(), w)));
  }
  return out;
}

std::vector<std::string> keys_of(const ParamValues& m) {
  std::vector<std::string> out;
  for (const auto& kv : m) out.push_back(kv.first);
  return out;
}

nlohmann::json values_json(const ParamValues& m) {
  auto out = nlohmann::json::object();
  for (const auto& [p, v] : m) out[p] = v;
  return out;
}

nlohmann::json with_class(const std::string& cls, nlohmann::json options) {
  nlohmann::json out = {{"class", cls}};
  out.update(options);
  return out;
}

std::string shape_text(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

GroupType read_group(YamlReader& r, const std::string& key, const YAML::Node& n) {
  std::string s = r.as<std::string>(n, key);
  try {
    return parse_group_type(s);
  } catch (const std::invalid_argument&) {
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " '" + s +
                     "' is not a group type; valid: Filters, 3D, Channels, Rows, Blocks");
  }
}

void check_group_fits(YamlReader& r, const ModelParams& params, const std::string& w, GroupType g) {
  const int64_t dim = params.at(w).dim();
  if (g == GroupType::kRows && dim != 2)
    throw InputError(r.where() + ": " + r.path() +
                     ": Rows pruning needs a 2-D (linear) weight, but " + w + " has " +
                     std::to_string(dim) + " dimensions");
  if (dim < 2)
    throw InputError(r.where() + ": " + r.path() + ": " + w + " is not a conv or linear weight");
}

/// The targets of a ranked pruner: the _AGP class's weights at their final sparsity, the
/// regularizers' form {param: [fraction, group]} (reg_regims), or weights at desired_sparsity
/// (0 when the fraction is not fixed, as for the AGP and hybrid classes' own keys).
std::vector<RankedTarget> read_ranked_targets(YamlReader& r, const ModelParams& params,
                                              RankedStructurePrunerOptions& o, bool agp,
                                              bool fixed_fraction) {
  std::vector<RankedTarget> targets;
  if (agp) {
    o.initial_sparsity(fraction(r, "initial_sparsity"));
    o.final_sparsity(fraction(r, "final_sparsity"));
    check_agp_range(r, o.initial_sparsity(), o.final_sparsity());
    GroupType g = read_group(r, "group_type", r.required("group_type"));
    for (const auto& w : read_weights(r, params)) targets.push_back({w, o.final_sparsity(), g});
  } else if (fixed_fraction && r.has("reg_regims")) {
    for (const auto& kv : r.node("reg_regims")) {
      const auto where = yaml_where(r.file(), kv.first);
      if (!kv.second.IsSequence() || kv.second.size() != 2)
        throw InputError(where + ": reg_regims entries are [fraction, group_type]");
      auto w = params.resolve(
          yaml_scalar(r.file(), kv.first, "a parameter name in " + r.path() + ".reg_regims"),
          where);
      targets.push_back({w, read_fraction(r, "reg_regims", kv.second[0]),
                         read_group(r, "reg_regims", kv.second[1])});
    }
    r.ignore({"desired_sparsity", "group_type", "weights"});
    if (r.has("weights") || r.has("desired_sparsity"))
      throw InputError(r.where() + ": " + r.path() +
                       " gives both reg_regims and weights/desired_sparsity");
  } else {
    double s = fixed_fraction ? fraction(r, "desired_sparsity") : 0.0;
    GroupType g = read_group(r, "group_type", r.required("group_type"));
    for (const auto& w : read_weights(r, params)) targets.push_back({w, s, g});
  }
  for (const auto& t : targets) check_group_fits(r, params, t.weight, t.group);
  return targets;
}

/// Distiller's `kwargs: {block_shape: [repetitions, depth, 1, 1]}`, which group_type Blocks needs
/// and only it takes; every Blocks weight must divide into the shape.
void read_block_shape(YamlReader& r, const ModelParams& params, RankedStructurePrunerOptions& o,
                      const std::vector<RankedTarget>& targets) {
  const bool blocks = std::any_of(targets.begin(), targets.end(), [](const RankedTarget& t) {
    return t.group == GroupType::kBlocks;
  });
  const YAML::Node kwargs = r.node("kwargs");
  if (kwargs && !kwargs.IsNull()) {
    if (!kwargs.IsMap())
      throw r.wrong_type(kwargs, "kwargs", "a mapping {block_shape: [R, D, 1, 1]}");
    YamlReader k(kwargs, r.file(), r.path() + ".kwargs");
    o.block_shape(k.get<std::vector<int64_t>>("block_shape"));
    k.finish();
    if (!blocks)
      throw InputError(r.where("kwargs") + ": " + r.path() +
                       ": kwargs.block_shape is for group_type Blocks, which no weight here uses");
  }
  if (blocks && o.block_shape().empty())
    throw InputError(r.where() + ": " + r.path() +
                     ": group_type Blocks needs kwargs: {block_shape: [repetitions, depth, 1, 1]}");
  for (const auto& t : targets) {
    if (t.group != GroupType::kBlocks) continue;
    const auto problem = block_shape_problem(params.at(t.weight), o.block_shape());
    if (!problem.empty())
      throw InputError(r.where("kwargs") + ": " + r.path() + ": " + t.weight + " " +
                       shape_text(params.at(t.weight)) + ": " + problem);
  }
}

/// The keys the ranked structure pruners share; `agp` selects the _AGP class's keys.
RankedStructurePrunerOptions read_ranked(YamlReader& r, const ModelParams& params, bool agp,
                                         bool fixed_fraction = true) {
  RankedStructurePrunerOptions o;
  o.agp(agp);
  if (r.has("group_dependency")) {
    auto dep = r.get<std::string>("group_dependency");
    if (dep != "Leader")
      throw InputError(r.where("group_dependency") + ": group_dependency '" + dep +
                       "' is unknown; valid: Leader");
    o.leader(true);
  } else {
    r.ignore({"group_dependency"});
  }
  auto targets = read_ranked_targets(r, params, o, agp, fixed_fraction);
  read_block_shape(r, params, o, targets);
  auto count_groups = [&](const RankedTarget& t) {
    const auto& w = params.at(t.weight);
    return t.group == GroupType::kBlocks ? block_magnitudes(w, o.block_shape()).numel()
                                         : group_magnitudes(w, t.group).numel();
  };
  if (o.leader()) {
    const auto n0 = count_groups(targets[0]);
    for (const auto& t : targets)
      if (count_groups(t) != n0)
        throw InputError(r.where() + ": " + r.path() +
                         ": Leader needs the same number of groups in every weight, but " +
                         t.weight + " differs from " + targets[0].weight);
  }
  o.targets(std::move(targets));
  r.finish();
  return o;
}

}  // namespace

// --- options -------------------------------------------------------------------------------------

LevelPrunerOptions LevelPrunerOptions::from_yaml(YamlReader& yaml, const ModelParams& params) {
  LevelPrunerOptions o(per_param(yaml, "levels", params, true));
  yaml.finish();
  return o;
}

nlohmann::json LevelPrunerOptions::to_json() const { return {{"levels", values_json(levels_)}}; }

MagnitudePrunerOptions MagnitudePrunerOptions::from_yaml(YamlReader& yaml,
                                                         const ModelParams& params) {
  MagnitudePrunerOptions o(per_param(yaml, "thresholds", params, false));
  yaml.finish();
  return o;
}

nlohmann::json MagnitudePrunerOptions::to_json() const {
  return {{"thresholds", values_json(thresholds_)}};
}

SensitivityPrunerOptions SensitivityPrunerOptions::from_yaml(YamlReader& yaml,
                                                             const ModelParams& params) {
  SensitivityPrunerOptions o(per_param(yaml, "sensitivities", params, false));
  yaml.finish();
  return o;
}

nlohmann::json SensitivityPrunerOptions::to_json() const {
  return {{"sensitivities", values_json(sensitivities_)}};
}

AgpPrunerOptions AgpPrunerOptions::from_yaml(YamlReader& yaml, const ModelParams& params) {
  AgpPrunerOptions o;
  o.initial_sparsity(fraction(yaml, "initial_sparsity"));
  o.final_sparsity(fraction(yaml, "final_sparsity"));
  check_agp_range(yaml, o.initial_sparsity(), o.final_sparsity());
  o.weights(read_weights(yaml, params));
  yaml.finish();
  return o;
}

nlohmann::json AgpPrunerOptions::to_json() const {
  return {{"initial_sparsity", initial_sparsity_},
          {"final_sparsity", final_sparsity_},
          {"weights", weights_}};
}

RankedStructurePrunerOptions RankedStructurePrunerOptions::from_yaml(YamlReader& yaml,
                                                                     const ModelParams& params) {
  return read_ranked(yaml, params, false);
}

RankedStructurePrunerOptions RankedStructurePrunerOptions::from_yaml_agp(
    YamlReader& yaml, const ModelParams& params) {
  return read_ranked(yaml, params, true);
}

RankedStructurePrunerOptions RankedStructurePrunerOptions::from_yaml_structures(
    YamlReader& yaml, const ModelParams& params) {
  return read_ranked(yaml, params, false, false);
}

nlohmann::json RankedStructurePrunerOptions::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  if (leader_) out["group_dependency"] = "Leader";
  if (agp_) {
    // The _AGP class names one group type for all its weights.
    out["initial_sparsity"] = initial_sparsity_;
    out["final_sparsity"] = final_sparsity_;
    if (!targets_.empty()) out["group_type"] = group_type_name(targets_.front().group);
    auto weights = nlohmann::json::array();
    for (const auto& t : targets_) weights.push_back(t.weight);
    out["weights"] = weights;
  } else {
    // reg_regims holds a fraction and group per weight, so it says everything `weights` can.
    auto regims = nlohmann::json::object();
    for (const auto& t : targets_) regims[t.weight] = {t.fraction, group_type_name(t.group)};
    out["reg_regims"] = regims;
  }
  if (!block_shape_.empty()) out["kwargs"] = {{"block_shape", block_shape_}};
  return out;
}

// --- pruners -------------------------------------------------------------------------------------

LevelPruner::LevelPruner(std::string name, LevelPrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> LevelPruner::targets() const { return keys_of(options_.levels()); }

void LevelPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t, const PolicyTiming&) {
  // A level of 0 leaves the parameter's mask as it is.
  for (const auto& [p, s] : options_.levels())
    if (s > 0) masks[p] = level_mask(params.at(p), s);
}

nlohmann::json LevelPruner::hyperparams() const {
  return with_class("SparsityLevelParameterPruner", options_.to_json());
}

MagnitudePruner::MagnitudePruner(std::string name, MagnitudePrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> MagnitudePruner::targets() const { return keys_of(options_.thresholds()); }

void MagnitudePruner::set_masks(ModelParams& params, MaskTable& masks, int64_t,
                                const PolicyTiming&) {
  for (const auto& [p, t] : options_.thresholds()) masks[p] = threshold_mask(params.at(p), t);
}

nlohmann::json MagnitudePruner::hyperparams() const {
  return with_class("MagnitudeParameterPruner", options_.to_json());
}

SensitivityPruner::SensitivityPruner(std::string name, SensitivityPrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> SensitivityPruner::targets() const {
  return keys_of(options_.sensitivities());
}

void SensitivityPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t,
                                  const PolicyTiming&) {
  for (const auto& [p, s] : options_.sensitivities()) {
    const auto& w = params.at(p);
    // The standard deviation is taken once, at the first call, and kept: later calls see masked
    // weights, whose zeros would shrink it. A single value has none; it is left alone.
    if (w.numel() < 2) continue;
    auto it = stddev_.find(p);
    if (it == stddev_.end()) it = stddev_.emplace(p, w.detach().std().item<double>()).first;
    masks[p] = threshold_mask(w, s * it->second);
  }
}

nlohmann::json SensitivityPruner::hyperparams() const {
  return with_class("SensitivityPruner", options_.to_json());
}

AgpPruner::AgpPruner(std::string name, AgpPrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> AgpPruner::targets() const { return options_.weights(); }

void AgpPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                          const PolicyTiming& t) {
  const double target =
      agp_target(options_.initial_sparsity(), options_.final_sparsity(), epoch, t);
  for (const auto& p : options_.weights()) masks[p] = level_mask(params.at(p), target);
}

nlohmann::json AgpPruner::hyperparams() const {
  return with_class("AutomatedGradualPruner", options_.to_json());
}

RankedStructurePruner::RankedStructurePruner(std::string name, RankedStructurePrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> RankedStructurePruner::targets() const {
  std::vector<std::string> out;
  for (const auto& t : options_.targets()) out.push_back(t.weight);
  return out;
}

std::vector<std::string> RankedStructurePruner::filter_targets() const {
  std::vector<std::string> out;
  for (const auto& t : options_.targets())
    if (t.group == GroupType::kFilters) out.push_back(t.weight);
  return out;
}

at::Tensor RankedStructurePruner::magnitudes(ModelParams& params, const std::string& weight,
                                             GroupType group) const {
  const bool l2 = options_.norm() == RankNorm::kL2;
  const auto& w = params.at(weight);
  const ChannelGroups* groups = params.channel_groups();
  if (group == GroupType::kBlocks) return block_magnitudes(w, options_.block_shape(), l2);
  if (group != GroupType::kFilters || !groups || !groups->has(weight))
    return group_magnitudes(w, group, l2);
  auto out = torch::zeros({w.size(0)}, torch::kFloat32);
  for (int64_t j = 0; j < w.size(0); ++j) {
    double sum = 0;
    int n = 0;
    for (const auto& m : groups->members(weight, j))
      if (m.role == GroupMember::Role::kProducer && m.tensor.size() > 6 &&
          m.tensor.compare(m.tensor.size() - 6, 6, "weight") == 0) {
        auto slice = params.at(m.tensor).detach().select(m.dim, m.index).abs();
        sum += (l2 ? slice.pow(2).mean().sqrt() : slice.mean()).item<double>();
        ++n;
      }
    out[j] = n ? sum / n : 0.0;
  }
  return out;
}

void RankedStructurePruner::set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                                      const PolicyTiming& timing) {
  const auto& targets = options_.targets();
  // This call's masks, built from scratch: they replace the old ones rather than multiply them,
  // so with dense weights (mask_on_forward_only, use_double_copies) the pruned set can move.
  MaskTable fresh;
  std::vector<int64_t> leader_choice;
  for (size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    const auto& w = params.at(t.weight);
    const double fraction = options_.agp() ? agp_target(options_.initial_sparsity(),
                                                        options_.final_sparsity(), epoch, timing)
                                           : t.fraction;
    std::vector<int64_t> pruned;
    if (options_.leader() && i > 0) {
      pruned = leader_choice;
    } else {
      pruned = smallest_groups(magnitudes(params, t.weight, t.group), fraction);
      leader_choice = pruned;
    }
    // Nothing to prune (fraction 0, or too few structures for it): the mask stays as it was.
    if (pruned.empty()) continue;
    if (t.group == GroupType::kBlocks) {
      auto m = block_mask(w, options_.block_shape(), pruned);
      auto it = fresh.find(t.weight);
      fresh[t.weight] = it == fresh.end() ? m : it->second * m;
      continue;
    }
    mask_groups(params, fresh, t.weight, t.group, pruned, w);
  }
  for (auto& [name, mask] : fresh) masks[name] = std::move(mask);
}

nlohmann::json RankedStructurePruner::hyperparams() const {
  const std::string cls = std::string(options_.norm() == RankNorm::kL2 ? "L2" : "L1") +
                          "RankedStructureParameterPruner" + (options_.agp() ? "_AGP" : "");
  return with_class(cls, options_.to_json());
}

// --- registry ------------------------------------------------------------------------------------

Registry<PrunerFactory>& pruner_registry() {
  static Registry<PrunerFactory> r("pruner class");
  return r;
}

void register_builtin_pruners() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = pruner_registry();
    r.add(
        "SparsityLevelParameterPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<LevelPruner>(n, LevelPrunerOptions::from_yaml(y, p));
        },
        "levels: {param or '*': sparsity}");
    r.add(
        "MagnitudeParameterPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<MagnitudePruner>(n, MagnitudePrunerOptions::from_yaml(y, p));
        },
        "thresholds: {param or '*': t}, prunes |w| <= t");
    r.add(
        "SensitivityPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<SensitivityPruner>(n, SensitivityPrunerOptions::from_yaml(y, p));
        },
        "sensitivities: {param or '*': s}, prunes |w| <= s * std(w)");
    r.add(
        "AutomatedGradualPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<AgpPruner>(n, AgpPrunerOptions::from_yaml(y, p));
        },
        "initial_sparsity, final_sparsity, weights: cubic schedule of level pruning");
    r.add(
        "L1RankedStructureParameterPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<RankedStructurePruner>(
              n, RankedStructurePrunerOptions::from_yaml(y, p));
        },
        "group_type, desired_sparsity, weights [, group_dependency: Leader] [, kwargs: "
        "{block_shape}]: L1-ranked filters/channels/rows/blocks");
    r.add(
        "L2RankedStructureParameterPruner",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<RankedStructurePruner>(
              n, RankedStructurePrunerOptions::from_yaml(y, p).norm(RankNorm::kL2));
        },
        "as L1RankedStructureParameterPruner, ranked by L2");
    r.add(
        "L1RankedStructureParameterPruner_AGP",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<RankedStructurePruner>(
              n, RankedStructurePrunerOptions::from_yaml_agp(y, p));
        },
        "initial_sparsity, final_sparsity, group_type, weights: L1-ranked structures on the AGP "
        "schedule");
    r.add(
        "L2RankedStructureParameterPruner_AGP",
        [](const std::string& n, YamlReader& y, const ModelParams& p) {
          return std::make_unique<RankedStructurePruner>(
              n, RankedStructurePrunerOptions::from_yaml_agp(y, p).norm(RankNorm::kL2));
        },
        "as L1RankedStructureParameterPruner_AGP, ranked by L2");
    register_splicing_pruner(r);
    register_random_pruners(r);
    register_activation_pruners(r);
    r.freeze();
  });
}

}  // namespace igb::compress
