#include "compress/regularizers.h"

#include <mutex>

#include "compress/yaml_reader.h"

namespace igb::compress {

namespace {

/// Views `w` as [groups, elements of a group] for a lasso group type.
at::Tensor grouped(const at::Tensor& w, LassoGroup g) {
  switch (g) {
    case LassoGroup::k2D: return w.flatten(0, 1).flatten(1);                   // each kernel
    case LassoGroup::k3D: return w.flatten(1);                                 // each filter
    case LassoGroup::k4D: return w.flatten().unsqueeze(0);                     // whole tensor
    case LassoGroup::kChannels: return w.transpose(0, 1).flatten(1);           // each input channel
    case LassoGroup::kRows: return w.flatten(1);                               // each row
    case LassoGroup::kCols: return w.transpose(0, 1).flatten(1);               // each column
  }
  return w;
}

LassoGroup parse_lasso_group(YamlReader& r, const std::string& s, const std::string& where, int64_t dim) {
  LassoGroup g;
  if (s == "2D") g = LassoGroup::k2D;
  else if (s == "3D" || s == "Filters") g = LassoGroup::k3D;
  else if (s == "4D") g = LassoGroup::k4D;
  else if (s == "Channels") g = LassoGroup::kChannels;
  else if (s == "Rows") g = LassoGroup::kRows;
  else if (s == "Cols") g = LassoGroup::kCols;
  else throw InputError(where + ": group '" + s + "' is unknown; valid: 2D, 3D, Filters, 4D, Channels, Rows, Cols");
  if ((g == LassoGroup::kRows || g == LassoGroup::kCols) && dim != 2)
    throw InputError(where + ": group " + s + " needs a 2-D weight");
  if ((g == LassoGroup::k2D || g == LassoGroup::k3D) && dim != 4)
    throw InputError(where + ": group " + s + " needs a 4-D convolution weight");
  (void)r;
  return g;
}

enum class Criterion { kNone, kMeanAbs, kMax };

Criterion read_criterion(YamlReader& r) {
  auto c = r.get<std::string>("threshold_criteria", "");
  if (c.empty()) return Criterion::kNone;
  if (c == "Mean_Abs") return Criterion::kMeanAbs;
  if (c == "Max") return Criterion::kMax;
  throw InputError(r.where("threshold_criteria") + ": threshold_criteria '" + c + "' is unknown; valid: Mean_Abs, Max");
}

class LassoRegularizer : public Regularizer {
 public:
  struct Term {
    std::string param;
    double strength;
    bool l1;  // element-wise L1 instead of a group lasso
    LassoGroup group;
  };
  LassoRegularizer(std::string name, std::vector<Term> terms, Criterion c)
      : Regularizer(std::move(name)), terms_(std::move(terms)), criterion_(c) {}
  std::vector<std::string> targets() const override {
    std::vector<std::string> out;
    for (const auto& t : terms_) out.push_back(t.param);
    return out;
  }
  at::Tensor loss(ModelParams& params) const override {
    at::Tensor total;
    for (const auto& t : terms_) {
      const auto& w = params.at(t.param);
      auto term = t.strength * (t.l1 ? w.abs().sum() : group_lasso(w, t.group));
      total = total.defined() ? total + term : term;
    }
    return total;
  }
  bool has_threshold() const override { return criterion_ != Criterion::kNone; }
  void threshold(ModelParams& params, MaskTable& masks) const override {
    if (criterion_ == Criterion::kNone) return;
    for (const auto& t : terms_) {
      const auto& w = params.at(t.param);
      at::Tensor m;
      if (!t.l1 && t.group == LassoGroup::k3D) {
        // Whole filters: zero them with their bias and following BatchNorm, as filter pruning
        // does, so evaluation with running statistics sees exactly zero channels.
        auto g = grouped(w.detach().abs(), t.group);
        auto mag = criterion_ == Criterion::kMax ? std::get<0>(g.max(1)) : g.mean(1);
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
        auto mag = criterion_ == Criterion::kMax ? std::get<0>(g.max(1)) : g.mean(1);
        auto keep = mag.gt(t.strength).to(torch::kFloat32).unsqueeze(1).expand_as(g);
        // Back to the weight's layout: invert the grouping view.
        switch (t.group) {
          case LassoGroup::k2D: m = keep.reshape(w.sizes()); break;
          case LassoGroup::k3D:
          case LassoGroup::kRows: m = keep.reshape(w.sizes()); break;
          case LassoGroup::k4D: m = keep.reshape(w.sizes()); break;
          case LassoGroup::kChannels:
          case LassoGroup::kCols: {
            auto sizes = w.sizes().vec();
            std::swap(sizes[0], sizes[1]);
            m = keep.reshape(sizes).transpose(0, 1).contiguous();
            break;
          }
        }
      }
      auto it = masks.find(t.param);
      masks[t.param] = it == masks.end() ? m : it->second * m;
    }
  }

 private:
  std::vector<Term> terms_;
  Criterion criterion_;
};

}  // namespace

at::Tensor group_lasso(const at::Tensor& w, LassoGroup group) { return grouped(w, group).norm(2, {1}).sum(); }

Registry<RegularizerFactory>& regularizer_registry() {
  static Registry<RegularizerFactory> r("regularizer class");
  return r;
}

void register_builtin_regularizers() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = regularizer_registry();
    r.add("L1Regularizer",
          [](const std::string& n, YamlReader& y, const ModelParams& p) -> std::unique_ptr<Regularizer> {
            std::vector<LassoRegularizer::Term> terms;
            YAML::Node regims = y.node("reg_regims");
            if (!regims || !regims.IsMap() || regims.size() == 0)
              throw InputError(y.where() + ": " + y.path() + " needs a non-empty mapping 'reg_regims'");
            for (const auto& kv : regims) {
              auto where = yaml_where(y.file(), kv.first);
              terms.push_back({p.resolve(kv.first.as<std::string>(), where), y.as<double>(kv.second, "reg_regims"), true,
                               LassoGroup::k4D});
            }
            return std::make_unique<LassoRegularizer>(n, terms, read_criterion(y));
          },
          "reg_regims: {param: strength} [, threshold_criteria]");
    r.add("GroupLassoRegularizer",
          [](const std::string& n, YamlReader& y, const ModelParams& p) -> std::unique_ptr<Regularizer> {
            std::vector<LassoRegularizer::Term> terms;
            YAML::Node regims = y.node("reg_regims");
            if (!regims || !regims.IsMap() || regims.size() == 0)
              throw InputError(y.where() + ": " + y.path() + " needs a non-empty mapping 'reg_regims'");
            auto& params = const_cast<ModelParams&>(p);
            for (const auto& kv : regims) {
              auto where = yaml_where(y.file(), kv.first);
              if (!kv.second.IsSequence() || kv.second.size() != 2)
                throw InputError(where + ": GroupLassoRegularizer reg_regims entries are [strength, group]");
              auto name = p.resolve(kv.first.as<std::string>(), where);
              terms.push_back({name, y.as<double>(kv.second[0], "reg_regims"), false,
                               parse_lasso_group(y, kv.second[1].as<std::string>(), where, params.at(name).dim())});
            }
            return std::make_unique<LassoRegularizer>(n, terms, read_criterion(y));
          },
          "reg_regims: {param: [strength, 2D|3D|4D|Channels|Rows|Cols]} [, threshold_criteria]");
    r.freeze();
  });
}

}  // namespace igb::compress
