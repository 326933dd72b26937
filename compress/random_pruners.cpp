#include "compress/random_pruners.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "core/yaml_reader.h"

namespace igb::compress {

RandomLevelStructurePrunerOptions RandomLevelStructurePrunerOptions::from_yaml(
    YamlReader& r, const ModelParams& params) {
  RandomLevelStructurePrunerOptions o;
  const auto range = r.get<std::vector<double>>("sparsity_range");
  if (range.size() != 2)
    throw InputError(r.where("sparsity_range") + ": " + r.path() +
                     ".sparsity_range needs two numbers [low, high], not " +
                     std::to_string(range.size()));
  for (double v : range)
    if (!(v >= 0 && v <= 1)) {
      std::ostringstream s;
      s << r.where("sparsity_range") << ": " << r.path() << ".sparsity_range holds " << v
        << ", which is not in [0, 1]";
      throw InputError(s.str());
    }
  o.sparsity_range(range);
  o.structures(RankedStructurePrunerOptions::from_yaml_structures(r, params));
  return o;
}

nlohmann::json RandomLevelStructurePrunerOptions::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  const auto& targets = structures_.targets();
  if (!targets.empty()) out["group_type"] = group_type_name(targets.front().group);
  auto weights = nlohmann::json::array();
  for (const auto& t : targets) weights.push_back(t.weight);
  out["weights"] = weights;
  out["sparsity_range"] = sparsity_range_;
  if (structures_.leader()) out["group_dependency"] = "Leader";
  if (!structures_.block_shape().empty())
    out["kwargs"] = {{"block_shape", structures_.block_shape()}};
  return out;
}

RandomLevelStructurePruner::RandomLevelStructurePruner(std::string name,
                                                       RandomLevelStructurePrunerOptions options)
    : Pruner(name), options_(std::move(options)), ranker_(name, options_.structures()) {}

std::vector<std::string> RandomLevelStructurePruner::targets() const { return ranker_.targets(); }

std::vector<std::string> RandomLevelStructurePruner::filter_targets() const {
  return ranker_.filter_targets();
}

void RandomLevelStructurePruner::set_masks(ModelParams& params, MaskTable& masks, int64_t,
                                           const PolicyTiming&) {
  const auto& targets = options_.structures().targets();
  const double low = options_.sparsity_range()[0], high = options_.sparsity_range()[1];
  MaskTable fresh;
  for (const auto& t : targets) {
    // One draw per weight and call, as Distiller's fraction_to_prune draws per parameter.
    const double u = torch::rand({1}, torch::TensorOptions().dtype(torch::kFloat64)).item<double>();
    const double fraction = low + (high - low) * u;
    const auto& ranked = options_.structures().leader() ? targets.front() : t;
    const auto pruned =
        smallest_groups(ranker_.magnitudes(params, ranked.weight, ranked.group), fraction);
    if (pruned.empty()) continue;
    const auto& w = params.at(t.weight);
    if (t.group == GroupType::kBlocks) {
      auto m = block_mask(w, options_.structures().block_shape(), pruned);
      auto it = fresh.find(t.weight);
      fresh[t.weight] = it == fresh.end() ? m : it->second * m;
      continue;
    }
    mask_groups(params, fresh, t.weight, t.group, pruned, w);
  }
  for (auto& [name, mask] : fresh) masks[name] = std::move(mask);
}

nlohmann::json RandomLevelStructurePruner::hyperparams() const {
  nlohmann::json out = {{"class", "RandomLevelStructureParameterPruner"}};
  out.update(options_.to_json());
  return out;
}

BernoulliFilterPruner::BernoulliFilterPruner(std::string name, FilterPrunerOptions options)
    : Pruner(std::move(name)), options_(std::move(options)) {}

void BernoulliFilterPruner::set_masks(ModelParams& params, MaskTable& masks, int64_t epoch,
                                      const PolicyTiming& timing) {
  const double fraction = options_.fraction(epoch, timing);
  if (fraction == 0) return;
  at::Tensor shared;
  for (const auto& name : options_.weights()) {
    const auto& w = params.at(name);
    const int64_t filters = w.size(0);
    at::Tensor keep = shared;
    if (!keep.defined()) {
      keep = torch::bernoulli(torch::full({filters}, 1.0 - fraction, torch::kFloat32));
      if (options_.leader()) shared = keep;
    }
    const double kept = keep.sum().item<double>();
    // Distiller divides by the kept share; with nothing kept it would fill the mask with NaN.
    const auto scaled = kept > 0 ? keep * (static_cast<double>(filters) / kept) : keep;
    std::vector<int64_t> shape(static_cast<size_t>(w.dim()), 1);
    shape[0] = filters;
    masks[name] = scaled.reshape(shape).expand(w.sizes()).contiguous().to(w.device());
  }
}

nlohmann::json BernoulliFilterPruner::hyperparams() const {
  nlohmann::json out = {
      {"class", options_.agp() ? "BernoulliFilterPruner_AGP" : "BernoulliFilterPruner"}};
  out.update(options_.to_json());
  return out;
}

void register_random_pruners(Registry<PrunerFactory>& r) {
  r.add(
      "RandomLevelStructureParameterPruner",
      [](const std::string& n, YamlReader& y, const ModelParams& p) {
        return std::make_unique<RandomLevelStructurePruner>(
            n, RandomLevelStructurePrunerOptions::from_yaml(y, p));
      },
      "group_type, sparsity_range: [low, high], weights [, group_dependency, kwargs]: L1-ranked "
      "structures at a fraction drawn per weight and call");
  r.add(
      "BernoulliFilterPruner",
      [](const std::string& n, YamlReader& y, const ModelParams& p) {
        return std::make_unique<BernoulliFilterPruner>(n,
                                                       FilterPrunerOptions::from_yaml(y, p, false));
      },
      "group_type: Filters, desired_sparsity, weights [, group_dependency]: drops each filter "
      "with that probability, scaling the kept ones");
  r.add(
      "BernoulliFilterPruner_AGP",
      [](const std::string& n, YamlReader& y, const ModelParams& p) {
        return std::make_unique<BernoulliFilterPruner>(n,
                                                       FilterPrunerOptions::from_yaml(y, p, true));
      },
      "initial_sparsity, final_sparsity, group_type: Filters, weights [, group_dependency]: "
      "BernoulliFilterPruner on the AGP schedule");
}

}  // namespace igb::compress
