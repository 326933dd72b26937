#include "compress/pruners.h"

#include <cmath>
#include <map>
#include <mutex>

#include "compress/yaml_reader.h"

namespace igb::compress {

double agp_target(double initial, double final_sparsity, int64_t epoch, const PolicyTiming& t) {
  const int64_t span = ((t.end - t.start - 1) / t.frequency) * t.frequency;
  if (span <= 0) return final_sparsity;
  const double progress = std::min(1.0, std::max(0.0, static_cast<double>(epoch - t.start) / static_cast<double>(span)));
  return final_sparsity + (initial - final_sparsity) * std::pow(1.0 - progress, 3);
}

void mask_groups(const ModelParams& params, MaskTable& masks, const std::string& weight, GroupType group,
                 const std::vector<int64_t>& pruned, const at::Tensor& w) {
  auto combine = [&](const std::string& name, const at::Tensor& m) {
    auto it = masks.find(name);
    masks[name] = it == masks.end() ? m : it->second * m;
  };
  const ChannelGroups* groups = params.channel_groups();
  if (group == GroupType::kFilters && groups && groups->has(weight)) {
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
  combine(weight, group_mask(w, group, pruned));
  if (group != GroupType::kChannels) {
    for (const auto& f : params.followers(weight).params) {
      auto m = torch::ones({w.size(0)}, torch::kFloat32);
      if (!pruned.empty()) m.index_fill_(0, torch::tensor(pruned, torch::kInt64), 0.0);
      combine(f, m);
    }
  }
}

namespace {

double read_fraction(YamlReader& r, const std::string& key, const YAML::Node& n) {
  double v = r.as<double>(n, key);
  if (!(v >= 0 && v <= 1))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " = " + std::to_string(v) + " is not in [0, 1]");
  return v;
}

/// A required key holding a fraction in [0, 1].
double fraction(YamlReader& r, const std::string& key) {
  double v = r.get<double>(key);
  if (!(v >= 0 && v <= 1))
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " = " + std::to_string(v) + " is not in [0, 1]");
  return v;
}

/// A {param or '*': value} map resolved against the model: '*' covers every conv and linear
/// weight that is not named explicitly.
std::map<std::string, double> per_param(YamlReader& r, const std::string& key, const ModelParams& params,
                                        bool fraction) {
  YAML::Node n = r.node(key);
  if (!n || !n.IsMap() || n.size() == 0)
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty mapping '" + key + "'");
  std::map<std::string, double> out;
  double star = -1;
  for (const auto& kv : n) {
    const auto name = kv.first.as<std::string>();
    double v = fraction ? read_fraction(r, key, kv.second) : r.as<double>(kv.second, key);
    if (name == "*") star = v;
    else out[params.resolve(name, yaml_where(r.file(), kv.first))] = v;
  }
  if (star >= 0)
    for (const auto& w : params.weight_names())
      if (!out.count(w)) out[w] = star;
  return out;
}

std::vector<std::string> read_weights(YamlReader& r, const ModelParams& params) {
  YAML::Node n = r.node("weights");
  if (!n || !n.IsSequence() || n.size() == 0)
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty list 'weights'");
  std::vector<std::string> out;
  for (const auto& w : n) out.push_back(params.resolve(w.as<std::string>(), yaml_where(r.file(), w)));
  return out;
}

std::vector<std::string> keys_of(const std::map<std::string, double>& m) {
  std::vector<std::string> out;
  for (const auto& kv : m) out.push_back(kv.first);
  return out;
}

/// Fine-grained pruners: per parameter, a mask from the weight and a per-parameter value.
class ElementPruner : public Pruner {
 public:
  enum class Kind { kLevel, kMagnitude, kSensitivity };
  ElementPruner(std::string name, Kind kind, std::map<std::string, double> values)
      : Pruner(std::move(name)), kind_(kind), values_(std::move(values)) {}
  std::vector<std::string> targets() const override { return keys_of(values_); }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t, const PolicyTiming&) override {
    for (const auto& [p, v] : values_) {
      const auto& w = params.at(p);
      switch (kind_) {
        case Kind::kLevel: masks[p] = level_mask(w, v); break;
        case Kind::kMagnitude: masks[p] = threshold_mask(w, v); break;
        case Kind::kSensitivity: masks[p] = threshold_mask(w, v * w.detach().std().item<double>()); break;
      }
    }
  }

 private:
  Kind kind_;
  std::map<std::string, double> values_;
};

class AgpPruner : public Pruner {
 public:
  AgpPruner(std::string name, double initial, double final_sparsity, std::vector<std::string> weights)
      : Pruner(std::move(name)), initial_(initial), final_(final_sparsity), weights_(std::move(weights)) {}
  std::vector<std::string> targets() const override { return weights_; }
  bool needs_range_timing() const override { return true; }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch, const PolicyTiming& t) override {
    const double target = agp_target(initial_, final_, epoch, t);
    for (const auto& p : weights_) masks[p] = level_mask(params.at(p), target);
  }

 private:
  double initial_, final_;
  std::vector<std::string> weights_;
};

/// L1/L2-ranked structure pruning, fixed fraction or AGP schedule, optional Leader dependency.
class RankedStructurePruner : public Pruner {
 public:
  struct Target {
    std::string weight;
    double fraction;
    GroupType group;
  };
  RankedStructurePruner(std::string name, std::vector<Target> targets, bool l2, bool leader, bool agp,
                        double initial, double final_sparsity)
      : Pruner(std::move(name)), targets_(std::move(targets)), l2_(l2), leader_(leader), agp_(agp),
        initial_(initial), final_(final_sparsity) {}
  std::vector<std::string> targets() const override {
    std::vector<std::string> out;
    for (const auto& t : targets_) out.push_back(t.weight);
    return out;
  }
  bool needs_range_timing() const override { return agp_; }
  std::vector<std::string> filter_targets() const override {
    std::vector<std::string> out;
    for (const auto& t : targets_)
      if (t.group == GroupType::kFilters) out.push_back(t.weight);
    return out;
  }
  /// Filter magnitudes; with channel groups, each filter's group is ranked as a whole (the mean
  /// of the magnitudes of all filters tied to it), so tied layers lose the same channels.
  at::Tensor magnitudes(ModelParams& params, const std::string& weight, GroupType group) const {
    const auto& w = params.at(weight);
    const ChannelGroups* groups = params.channel_groups();
    if (group != GroupType::kFilters || !groups || !groups->has(weight)) return group_magnitudes(w, group, l2_);
    auto out = torch::zeros({w.size(0)}, torch::kFloat32);
    for (int64_t j = 0; j < w.size(0); ++j) {
      double sum = 0;
      int n = 0;
      for (const auto& m : groups->members(weight, j))
        if (m.role == GroupMember::Role::kProducer && m.tensor.size() > 6 &&
            m.tensor.compare(m.tensor.size() - 6, 6, "weight") == 0) {
          auto slice = params.at(m.tensor).detach().select(m.dim, m.index).abs();
          sum += (l2_ ? slice.pow(2).mean().sqrt() : slice.mean()).item<double>();
          ++n;
        }
      out[j] = n ? sum / n : 0.0;
    }
    return out;
  }
  void set_masks(ModelParams& params, MaskTable& masks, int64_t epoch, const PolicyTiming& timing) override {
    std::vector<int64_t> leader_choice;
    for (size_t i = 0; i < targets_.size(); ++i) {
      const auto& t = targets_[i];
      const auto& w = params.at(t.weight);
      const double fraction = agp_ ? agp_target(initial_, final_, epoch, timing) : t.fraction;
      std::vector<int64_t> pruned;
      if (leader_ && i > 0) {
        pruned = leader_choice;
      } else {
        pruned = smallest_groups(magnitudes(params, t.weight, t.group), fraction);
        leader_choice = pruned;
      }
      mask_groups(params, masks, t.weight, t.group, pruned, w);
    }
  }

 private:
  std::vector<Target> targets_;
  bool l2_, leader_, agp_;
  double initial_, final_;
};

GroupType read_group(YamlReader& r, const std::string& key, const YAML::Node& n) {
  std::string s = r.as<std::string>(n, key);
  try {
    return parse_group_type(s);
  } catch (const std::invalid_argument&) {
    throw InputError(r.where(key) + ": " + r.path() + "." + key + " '" + s +
                     "' is not a group type; valid: Filters, 3D, Channels, Rows");
  }
}

void check_group_fits(YamlReader& r, const ModelParams& params, const std::string& w, GroupType g) {
  const int64_t dim = const_cast<ModelParams&>(params).at(w).dim();
  if (g == GroupType::kRows && dim != 2)
    throw InputError(r.where() + ": " + r.path() + ": Rows pruning needs a 2-D (linear) weight, but " + w + " has " +
                     std::to_string(dim) + " dimensions");
  if (dim < 2)
    throw InputError(r.where() + ": " + r.path() + ": " + w + " is not a conv or linear weight");
}

std::unique_ptr<Pruner> make_ranked(const std::string& name, YamlReader& r, const ModelParams& params, bool l2,
                                    bool agp) {
  std::vector<RankedStructurePruner::Target> targets;
  double initial = 0, final_sparsity = 0;
  bool leader = false;
  if (r.has("group_dependency")) {
    auto dep = r.get<std::string>("group_dependency");
    if (dep != "Leader")
      throw InputError(r.where("group_dependency") + ": group_dependency '" + dep + "' is unknown; valid: Leader");
    leader = true;
  } else {
    r.ignore({"group_dependency"});
  }
  if (agp) {
    initial = fraction(r, "initial_sparsity");
    final_sparsity = fraction(r, "final_sparsity");
    GroupType g = read_group(r, "group_type", r.node("group_type"));
    for (const auto& w : read_weights(r, params)) targets.push_back({w, final_sparsity, g});
  } else if (r.has("reg_regims")) {
    // The form Distiller's regularizers use: {param: [fraction, group]}.
    for (const auto& kv : r.node("reg_regims")) {
      const auto where = yaml_where(r.file(), kv.first);
      if (!kv.second.IsSequence() || kv.second.size() != 2)
        throw InputError(where + ": reg_regims entries are [fraction, group_type]");
      auto w = params.resolve(kv.first.as<std::string>(), where);
      targets.push_back({w, read_fraction(r, "reg_regims", kv.second[0]), read_group(r, "reg_regims", kv.second[1])});
    }
    r.ignore({"desired_sparsity", "group_type", "weights"});
    if (r.has("weights") || r.has("desired_sparsity"))
      throw InputError(r.where() + ": " + r.path() + " gives both reg_regims and weights/desired_sparsity");
  } else {
    double s = fraction(r, "desired_sparsity");
    GroupType g = read_group(r, "group_type", r.node("group_type"));
    for (const auto& w : read_weights(r, params)) targets.push_back({w, s, g});
  }
  for (const auto& t : targets) check_group_fits(r, params, t.weight, t.group);
  if (leader) {
    auto& p = const_cast<ModelParams&>(params);
    const auto n0 = group_magnitudes(p.at(targets[0].weight), targets[0].group).numel();
    for (const auto& t : targets)
      if (group_magnitudes(p.at(t.weight), t.group).numel() != n0)
        throw InputError(r.where() + ": " + r.path() + ": Leader needs the same number of groups in every weight, but " +
                         t.weight + " differs from " + targets[0].weight);
  }
  return std::make_unique<RankedStructurePruner>(name, targets, l2, leader, agp, initial, final_sparsity);
}

}  // namespace

Registry<PrunerFactory>& pruner_registry() {
  static Registry<PrunerFactory> r("pruner class");
  return r;
}

void register_builtin_pruners() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = pruner_registry();
    r.add("SparsityLevelParameterPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) {
            return std::make_unique<ElementPruner>(n, ElementPruner::Kind::kLevel, per_param(y, "levels", p, true));
          },
          "levels: {param or '*': sparsity}");
    r.add("MagnitudeParameterPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) {
            return std::make_unique<ElementPruner>(n, ElementPruner::Kind::kMagnitude, per_param(y, "thresholds", p, false));
          },
          "thresholds: {param or '*': t}, prunes |w| <= t");
    r.add("SensitivityPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) {
            return std::make_unique<ElementPruner>(n, ElementPruner::Kind::kSensitivity,
                                                   per_param(y, "sensitivities", p, false));
          },
          "sensitivities: {param or '*': s}, prunes |w| <= s * std(w)");
    r.add("AutomatedGradualPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) {
            double i = fraction(y, "initial_sparsity");
            double f = fraction(y, "final_sparsity");
            return std::make_unique<AgpPruner>(n, i, f, read_weights(y, p));
          },
          "initial_sparsity, final_sparsity, weights: cubic schedule of level pruning");
    r.add("L1RankedStructureParameterPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) { return make_ranked(n, y, p, false, false); },
          "group_type, desired_sparsity, weights [, group_dependency: Leader]: L1-ranked filters/channels/rows");
    r.add("L2RankedStructureParameterPruner",
          [](const std::string& n, YamlReader& y, const ModelParams& p) { return make_ranked(n, y, p, true, false); },
          "as L1RankedStructureParameterPruner, ranked by L2");
    r.add("L1RankedStructureParameterPruner_AGP",
          [](const std::string& n, YamlReader& y, const ModelParams& p) { return make_ranked(n, y, p, false, true); },
          "initial_sparsity, final_sparsity, group_type, weights: L1-ranked structures on the AGP schedule");
    r.freeze();
  });
}

}  // namespace igb::compress
