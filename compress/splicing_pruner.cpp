#include "compress/splicing_pruner.h"

#include <nlohmann/json.hpp>

#include "core/yaml_reader.h"

namespace igb::compress {

SplicingPrunerOptions SplicingPrunerOptions::from_yaml(YamlReader& r, const ModelParams& params) {
  SplicingPrunerOptions o;
  YAML::Node n = r.required("sensitivities");
  if (!n || !n.IsMap() || n.size() == 0)
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty mapping 'sensitivities'");
  ParamValues values;
  bool has_star = false;
  double star = 0;
  for (const auto& kv : n) {
    const auto name =
        yaml_scalar(r.file(), kv.first, "a parameter name in " + r.path() + ".sensitivities");
    const double v = r.as<double>(kv.second, "sensitivities");
    if (name == "*") {
      has_star = true;
      star = v;
    } else {
      values[params.resolve(name, yaml_where(r.file(), kv.first))] = v;
    }
  }
  // Distiller applies '*' to every parameter of the model that is not named.
  if (has_star)
    for (const auto& p : params.names())
      if (!values.count(p)) values[p] = star;
  o.sensitivities(std::move(values));
  o.low_thresh_mult(r.get<double>("low_thresh_mult"));
  o.hi_thresh_mult(r.get<double>("hi_thresh_mult"));
  o.sensitivity_multiplier(r.get<double>("sensitivity_multiplier", 0.0));
  r.finish();
  return o;
}

nlohmann::json SplicingPrunerOptions::to_json() const {
  auto s = nlohmann::json::object();
  for (const auto& [p, v] : sensitivities_) s[p] = v;
  return {{"sensitivities", s},
          {"low_thresh_mult", low_thresh_mult_},
          {"hi_thresh_mult", hi_thresh_mult_},
          {"sensitivity_multiplier", sensitivity_multiplier_}};
}

SplicingPruner::SplicingPruner(std::string name, SplicingPrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

std::vector<std::string> SplicingPruner::targets() const {
  std::vector<std::string> out;
  for (const auto& kv : options_.sensitivities()) out.push_back(kv.first);
  return out;
}

void SplicingPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                               const PolicyTiming& timing) {
  torch::NoGradGuard no_grad;
  for (const auto& [p, s] : options_.sensitivities()) {
    const auto magnitude = params.at(p).detach().abs();
    if (magnitude.numel() < 2) continue;
    auto it = stats_.find(p);
    if (it == stats_.end())
      it = stats_
               .emplace(p, std::make_pair(magnitude.mean().item<double>(),
                                          magnitude.std().item<double>()))
               .first;
    double sensitivity = s;
    if (options_.sensitivity_multiplier() > 0)
      sensitivity *=
          static_cast<double>(epoch - timing.first()) * options_.sensitivity_multiplier() + 1;
    const double base = it->second.first + it->second.second * sensitivity;
    const double low = base * options_.low_thresh_mult();
    const double high = base * options_.hi_thresh_mult();
    auto found = masks.find(p);
    at::Tensor mask =
        found != masks.end()
            ? found->second
            : torch::ones(magnitude.sizes(), magnitude.options().dtype(torch::kFloat32));
    mask = torch::where(magnitude.lt(low), torch::zeros_like(mask), mask);
    mask = torch::where(magnitude.ge(high), torch::ones_like(mask), mask);
    masks[p] = mask;
  }
}

nlohmann::json SplicingPruner::hyperparams() const {
  nlohmann::json out = {{"class", "SplicingPruner"}};
  out.update(options_.to_json());
  return out;
}

void register_splicing_pruner(Registry<PrunerFactory>& r) {
  r.add(
      "SplicingPruner",
      [](const std::string& n, YamlReader& y, const ModelParams& p) {
        return std::make_unique<SplicingPruner>(n, SplicingPrunerOptions::from_yaml(y, p));
      },
      "sensitivities: {param or '*': s}, low_thresh_mult, hi_thresh_mult [, "
      "sensitivity_multiplier]: network surgery, prunes below the low threshold and splices back "
      "above the high one");
}

}  // namespace igb::compress
