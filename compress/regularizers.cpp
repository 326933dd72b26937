#include "compress/regularizers.h"

#include <nlohmann/json.hpp>

#include <mutex>

#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

/// Views `w` as [groups, elements of a group] for a lasso group type.
at::Tensor grouped(const at::Tensor& w, LassoGroup g) {
  switch (g) {
    case LassoGroup::k2D:
      return w.flatten(0, 1).flatten(1);  // each kernel
    case LassoGroup::k3D:
      return w.flatten(1);  // each filter
    case LassoGroup::k4D:
      return w.flatten().unsqueeze(0);  // whole tensor
    case LassoGroup::kChannels:
      return w.transpose(0, 1).flatten(1);  // each input channel
    case LassoGroup::kRows:
      return w.flatten(1);  // each row
    case LassoGroup::kCols:
      return w.transpose(0, 1).flatten(1);  // each column
    case LassoGroup::kRowsCols:
    case LassoGroup::kChannels4D:
      throw std::logic_error("a combined lasso group has no single grouping");
  }
  return w;
}

LassoGroup parse_lasso_group(const std::string& s, const std::string& where, int64_t dim) {
  LassoGroup g;
  if (s == "2D")
    g = LassoGroup::k2D;
  else if (s == "3D" || s == "Filters")
    g = LassoGroup::k3D;
  else if (s == "4D")
    g = LassoGroup::k4D;
  else if (s == "Channels")
    g = LassoGroup::kChannels;
  else if (s == "Rows")
    g = LassoGroup::kRows;
  else if (s == "Cols")
    g = LassoGroup::kCols;
  else if (s == "Rows+Cols" || s == "Cols+Rows")
    g = LassoGroup::kRowsCols;
  else if (s == "Channels+4D" || s == "4D+Channels")
    g = LassoGroup::kChannels4D;
  else
    throw InputError(where + ": group '" + s +
                     "' is unknown; valid: 2D, 3D, Filters, 4D, Channels, Rows, Cols, Rows+Cols, "
                     "Channels+4D");
  if ((g == LassoGroup::kRows || g == LassoGroup::kCols || g == LassoGroup::kRowsCols) && dim != 2)
    throw InputError(where + ": group " + s + " needs a 2-D weight");
  if ((g == LassoGroup::k2D || g == LassoGroup::k3D || g == LassoGroup::kChannels4D) && dim != 4)
    throw InputError(where + ": group " + s + " needs a 4-D convolution weight");
  return g;
}

ThresholdCriterion read_criterion(YamlReader& r) {
  auto c = r.get<std::string>("threshold_criteria", "");
  if (c.empty()) return ThresholdCriterion::kNone;
  if (c == "Mean_Abs") return ThresholdCriterion::kMeanAbs;
  if (c == "Max") return ThresholdCriterion::kMax;
  throw InputError(r.where("threshold_criteria") + ": threshold_criteria '" + c +
                   "' is unknown; valid: Mean_Abs, Max");
}

void criterion_json(ThresholdCriterion c, nlohmann::json& out) {
  if (c == ThresholdCriterion::kMeanAbs) out["threshold_criteria"] = "Mean_Abs";
  if (c == ThresholdCriterion::kMax) out["threshold_criteria"] = "Max";
}

/// A regularization strength: a finite number, at least 0 (a negative one would reward large
/// weights).
double read_strength(YamlReader& y, const YAML::Node& n) {
  const double v = y.as<double>(n, "reg_regims");
  if (v < 0)
    throw InputError(yaml_where(y.file(), n) + ": " + y.path() +
                     ": a regularization strength must be >= 0, not " + n.Scalar());
  return v;
}

YAML::Node read_regims(YamlReader& y) {
  YAML::Node regims = y.required("reg_regims");
  if (!regims || !regims.IsMap() || regims.size() == 0)
    throw InputError(y.where() + ": " + y.path() + " needs a non-empty mapping 'reg_regims'");
  return regims;
}

/// One term of either class: element-wise L1 or a group lasso.
struct Term {
  std::string param;
  double strength;
  bool l1;
  LassoGroup group;
};

std::vector<Term> terms_of(const L1RegularizerOptions& o) {
  std::vector<Term> out;
  for (const auto& t : o.reg_regims()) out.push_back({t.param, t.strength, true, LassoGroup::k4D});
  return out;
}

std::vector<Term> terms_of(const GroupLassoRegularizerOptions& o) {
  std::vector<Term> out;
  for (const auto& t : o.reg_regims()) out.push_back({t.param, t.strength, false, t.group});
  return out;
}

at::Tensor lasso_loss(ModelParams& params, const std::vector<Term>& terms) {
  at::Tensor total;
  for (const auto& t : terms) {
    const auto& w = params.at(t.param);
    auto term = t.strength * (t.l1 ? w.abs().sum() : group_lasso(w, t.group));
    total = total.defined() ? total + term : term;
  }
  return total;
}

void lasso_threshold(ModelParams& params, MaskTable& masks, const std::vector<Term>& terms,
                     ThresholdCriterion criterion) {
  if (criterion == ThresholdCriterion::kNone) return;
  for (const auto& t : terms) {
    const auto& w = params.at(t.param);
    at::Tensor m;
    if (!t.l1 && t.group == LassoGroup::k3D) {
      // Whole filters: zero them with their bias and following BatchNorm, as filter pruning
      // does, so evaluation with running statistics sees exactly zero channels.
      auto g = grouped(w.detach().abs(), t.group);
      auto mag = criterion == ThresholdCriterion::kMax ? std::get<0>(g.max(1)) : g.mean(1);
      std::vector<int64_t> pruned;
      auto weak = mag.le(t.strength).nonzero().flatten();
      for (int64_t i = 0; i < weak.numel(); ++i) pruned.push_back(weak[i].item<int64_t>());
      mask_groups(params, masks, t.param, GroupType::kFilters, pruned, w);
      continue;
    }
    if (t.l1) {
      m = threshold_mask(w, t.strength);
    } else {
      auto g = grouped(w.detach().abs(), t.group);
      auto mag = criterion == ThresholdCriterion::kMax ? std::get<0>(g.max(1)) : g.mean(1);
      auto keep = mag.gt(t.strength).to(torch::kFloat32).unsqueeze(1).expand_as(g);
      // Back to the weight's layout: invert the grouping view.
      switch (t.group) {
        case LassoGroup::k2D:
          m = keep.reshape(w.sizes());
          break;
        case LassoGroup::k3D:
        case LassoGroup::kRows:
          m = keep.reshape(w.sizes());
          break;
        case LassoGroup::k4D:
          m = keep.reshape(w.sizes());
          break;
        case LassoGroup::kChannels:
        case LassoGroup::kCols: {
          auto sizes = w.sizes().vec();
          std::swap(sizes[0], sizes[1]);
          m = keep.reshape(sizes).transpose(0, 1).contiguous();
          break;
        }
        case LassoGroup::kRowsCols:
        case LassoGroup::kChannels4D:
          throw std::logic_error("combined lasso groups are refused with threshold_criteria");
      }
    }
    auto it = masks.find(t.param);
    masks[t.param] = it == masks.end() ? m : it->second * m;
  }
}

template <class T>
std::vector<std::string> params_of(const std::vector<T>& terms) {
  std::vector<std::string> out;
  for (const auto& t : terms) out.push_back(t.param);
  return out;
}

}  // namespace

std::string lasso_group_name(LassoGroup group) {
  switch (group) {
    case LassoGroup::k2D:
      return "2D";
    case LassoGroup::k3D:
      return "3D";
    case LassoGroup::k4D:
      return "4D";
    case LassoGroup::kChannels:
      return "Channels";
    case LassoGroup::kRows:
      return "Rows";
    case LassoGroup::kCols:
      return "Cols";
    case LassoGroup::kRowsCols:
      return "Rows+Cols";
    case LassoGroup::kChannels4D:
      return "Channels+4D";
  }
  return "?";
}

at::Tensor group_lasso(const at::Tensor& w, LassoGroup group) {
  if (group == LassoGroup::kRowsCols)
    return group_lasso(w, LassoGroup::kRows) + group_lasso(w, LassoGroup::kCols);
  if (group == LassoGroup::kChannels4D)
    return group_lasso(w, LassoGroup::kChannels) + group_lasso(w, LassoGroup::k4D);
  return grouped(w, group).norm(2, {1}).sum();
}

// --- options -------------------------------------------------------------------------------------

L1RegularizerOptions L1RegularizerOptions::from_yaml(YamlReader& y, const ModelParams& p) {
  L1RegularizerOptions o;
  for (const auto& kv : read_regims(y)) {
    auto where = yaml_where(y.file(), kv.first);
    o.reg_regims_.push_back(
        {p.resolve(
             yaml_scalar(y.file(), kv.first, "a parameter name in " + y.path() + ".reg_regims"),
             where),
         read_strength(y, kv.second)});
  }
  o.threshold_criteria(read_criterion(y));
  y.finish();
  return o;
}

nlohmann::json L1RegularizerOptions::to_json() const {
  auto regims = nlohmann::json::object();
  for (const auto& t : reg_regims_) regims[t.param] = t.strength;
  nlohmann::json out = {{"reg_regims", regims}};
  criterion_json(threshold_criteria_, out);
  return out;
}

GroupLassoRegularizerOptions GroupLassoRegularizerOptions::from_yaml(YamlReader& y,
                                                                     const ModelParams& p) {
  GroupLassoRegularizerOptions o;
  for (const auto& kv : read_regims(y)) {
    auto where = yaml_where(y.file(), kv.first);
    if (!kv.second.IsSequence() || kv.second.size() != 2)
      throw InputError(where + ": GroupLassoRegularizer reg_regims entries are [strength, group]");
    auto name = p.resolve(
        yaml_scalar(y.file(), kv.first, "a parameter name in " + y.path() + ".reg_regims"), where);
    o.reg_regims_.push_back({name, read_strength(y, kv.second[0]),
                             parse_lasso_group(y.as<std::string>(kv.second[1], "reg_regims"), where,
                                               p.at(name).dim())});
  }
  o.threshold_criteria(read_criterion(y));
  if (o.threshold_criteria() != ThresholdCriterion::kNone)
    for (const auto& t : o.reg_regims_)
      if (t.group == LassoGroup::kRowsCols || t.group == LassoGroup::kChannels4D)
        throw InputError(y.where("threshold_criteria") + ": " + y.path() + ": group " +
                         lasso_group_name(t.group) + " of " + t.param +
                         " cannot be thresholded (its groups overlap; Distiller refuses it too)");
  y.finish();
  return o;
}

nlohmann::json GroupLassoRegularizerOptions::to_json() const {
  auto regims = nlohmann::json::object();
  for (const auto& t : reg_regims_) regims[t.param] = {t.strength, lasso_group_name(t.group)};
  nlohmann::json out = {{"reg_regims", regims}};
  criterion_json(threshold_criteria_, out);
  return out;
}

GroupVarianceRegularizerOptions GroupVarianceRegularizerOptions::from_yaml(YamlReader& y,
                                                                           const ModelParams& p) {
  GroupVarianceRegularizerOptions o;
  for (const auto& kv : read_regims(y)) {
    auto where = yaml_where(y.file(), kv.first);
    if (!kv.second.IsSequence() || kv.second.size() != 2)
      throw InputError(where +
                       ": GroupVarianceRegularizer reg_regims entries are [strength, Channels]");
    auto name = p.resolve(
        yaml_scalar(y.file(), kv.first, "a parameter name in " + y.path() + ".reg_regims"), where);
    const auto group = y.as<std::string>(kv.second[1], "reg_regims");
    if (group != "Channels")
      throw InputError(where + ": GroupVarianceRegularizer groups only Channels, not '" + group +
                       "'");
    if (p.at(name).dim() != 4)
      throw InputError(where + ": GroupVarianceRegularizer needs a 4-D convolution weight; " +
                       name + " has " + std::to_string(p.at(name).dim()) + " dimensions");
    o.reg_regims_.push_back({name, read_strength(y, kv.second[0]), LassoGroup::kChannels});
  }
  y.finish();
  return o;
}

nlohmann::json GroupVarianceRegularizerOptions::to_json() const {
  auto regims = nlohmann::json::object();
  for (const auto& t : reg_regims_) regims[t.param] = {t.strength, lasso_group_name(t.group)};
  return {{"reg_regims", regims}};
}

// --- regularizers --------------------------------------------------------------------------------

L1Regularizer::L1Regularizer(std::string name, L1RegularizerOptions options)
    : Regularizer(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> L1Regularizer::targets() const { return params_of(options_.reg_regims()); }

at::Tensor L1Regularizer::loss(ModelParams& params) const {
  return lasso_loss(params, terms_of(options_));
}

void L1Regularizer::threshold(ModelParams& params, MaskTable& masks) const {
  lasso_threshold(params, masks, terms_of(options_), options_.threshold_criteria());
}

nlohmann::json L1Regularizer::hyperparams() const {
  nlohmann::json out = {{"class", "L1Regularizer"}};
  out.update(options_.to_json());
  return out;
}

GroupLassoRegularizer::GroupLassoRegularizer(std::string name, GroupLassoRegularizerOptions options)
    : Regularizer(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> GroupLassoRegularizer::targets() const {
  return params_of(options_.reg_regims());
}

at::Tensor GroupLassoRegularizer::loss(ModelParams& params) const {
  return lasso_loss(params, terms_of(options_));
}

void GroupLassoRegularizer::threshold(ModelParams& params, MaskTable& masks) const {
  lasso_threshold(params, masks, terms_of(options_), options_.threshold_criteria());
}

nlohmann::json GroupLassoRegularizer::hyperparams() const {
  nlohmann::json out = {{"class", "GroupLassoRegularizer"}};
  out.update(options_.to_json());
  return out;
}

GroupVarianceRegularizer::GroupVarianceRegularizer(std::string name,
                                                   GroupVarianceRegularizerOptions options)
    : Regularizer(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> GroupVarianceRegularizer::targets() const {
  return params_of(options_.reg_regims());
}

at::Tensor GroupVarianceRegularizer::loss(ModelParams& params) const {
  at::Tensor total;
  for (const auto& t : options_.reg_regims()) {
    const auto& w = params.at(t.param);
    // Each input channel's L2 norm over all filters; 1e-8 keeps sqrt differentiable at 0.
    const auto channels = w.pow(2).sum({0, 2, 3}).add(1e-8).sqrt();
    const auto term = t.strength / channels.var();
    total = total.defined() ? total + term : term;
  }
  return total;
}

nlohmann::json GroupVarianceRegularizer::hyperparams() const {
  nlohmann::json out = {{"class", "GroupVarianceRegularizer"}};
  out.update(options_.to_json());
  return out;
}

// --- registry ------------------------------------------------------------------------------------

Registry<RegularizerFactory>& regularizer_registry() {
  static Registry<RegularizerFactory> r("regularizer class");
  return r;
}

void register_builtin_regularizers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = regularizer_registry();
    r.add(
        "L1Regularizer",
        [](const std::string& n, YamlReader& y,
           const ModelParams& p) -> std::unique_ptr<Regularizer> {
          return std::make_unique<L1Regularizer>(n, L1RegularizerOptions::from_yaml(y, p));
        },
        "reg_regims: {param: strength} [, threshold_criteria]");
    r.add(
        "GroupLassoRegularizer",
        [](const std::string& n, YamlReader& y,
           const ModelParams& p) -> std::unique_ptr<Regularizer> {
          return std::make_unique<GroupLassoRegularizer>(
              n, GroupLassoRegularizerOptions::from_yaml(y, p));
        },
        "reg_regims: {param: [strength, 2D|3D|4D|Channels|Rows|Cols]} [, threshold_criteria]");
    r.add(
        "GroupVarianceRegularizer",
        [](const std::string& n, YamlReader& y,
           const ModelParams& p) -> std::unique_ptr<Regularizer> {
          return std::make_unique<GroupVarianceRegularizer>(
              n, GroupVarianceRegularizerOptions::from_yaml(y, p));
        },
        "reg_regims: {param: [strength, Channels]} (4-D weights); loss strength / var(channel "
        "norms)");
    r.freeze();
  });
}

}  // namespace igb::compress
