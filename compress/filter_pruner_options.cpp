#include "compress/filter_pruner_options.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "compress/pruners.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

double read_fraction(YamlReader& r, const std::string& key) {
  const double v = r.get<double>(key);
  if (!(v >= 0 && v <= 1)) {
    std::ostringstream s;
    s << r.where(key) << ": " << r.path() << "." << key << " = " << v << " is not in [0, 1]";
    throw InputError(s.str());
  }
  return v;
}

}  // namespace

FilterPrunerOptions FilterPrunerOptions::from_yaml(YamlReader& r, const ModelParams& params,
                                                   bool agp) {
  FilterPrunerOptions o;
  o.agp(agp);
  if (agp) {
    o.initial_sparsity(read_fraction(r, "initial_sparsity"));
    o.final_sparsity(read_fraction(r, "final_sparsity"));
    if (!(o.initial_sparsity() < o.final_sparsity())) {
      std::ostringstream s;
      s << r.where("initial_sparsity") << ": " << r.path() << ": initial_sparsity "
        << o.initial_sparsity() << " must be below final_sparsity " << o.final_sparsity()
        << " (AGP raises sparsity from the one to the other)";
      throw InputError(s.str());
    }
  } else {
    o.desired_sparsity(read_fraction(r, "desired_sparsity"));
  }
  const auto group = r.get<std::string>("group_type");
  if (group != "Filters" && group != "3D")
    throw InputError(r.where("group_type") + ": " + r.path() + ".group_type '" + group +
                     "': this class prunes whole filters; valid: Filters, 3D");
  if (r.has("group_dependency")) {
    const auto dep = r.get<std::string>("group_dependency");
    if (dep != "Leader")
      throw InputError(r.where("group_dependency") + ": group_dependency '" + dep +
                       "' is unknown; valid: Leader");
    o.leader(true);
  } else {
    r.ignore({"group_dependency"});
  }
  const YAML::Node n = r.required("weights");
  std::vector<std::string> weights;
  if (n && n.IsScalar() && !n.Scalar().empty()) {
    weights.push_back(params.resolve(n.Scalar(), yaml_where(r.file(), n)));
  } else if (n && n.IsSequence() && n.size() > 0) {
    for (const auto& w : n) {
      if (!w.IsScalar()) throw r.wrong_type(w, "weights", "a parameter name");
      weights.push_back(params.resolve(w.Scalar(), yaml_where(r.file(), w)));
    }
  } else {
    throw InputError(r.where() + ": " + r.path() + " needs a non-empty list 'weights'");
  }
  for (const auto& w : weights) {
    const auto& t = params.at(w);
    if (t.dim() != 4)
      throw InputError(r.where("weights") + ": " + r.path() + ": " + w + " has " +
                       std::to_string(t.dim()) +
                       " dimensions; this class prunes the filters of 4-D conv weights");
    if (o.leader() && t.size(0) != params.at(weights.front()).size(0))
      throw InputError(r.where("weights") + ": " + r.path() +
                       ": Leader needs the same number of filters in every weight, but " + w +
                       " differs from " + weights.front());
  }
  o.weights(std::move(weights));
  r.finish();
  return o;
}

nlohmann::json FilterPrunerOptions::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  if (agp_) {
    out["initial_sparsity"] = initial_sparsity_;
    out["final_sparsity"] = final_sparsity_;
  } else {
    out["desired_sparsity"] = desired_sparsity_;
  }
  out["group_type"] = "Filters";
  out["weights"] = weights_;
  if (leader_) out["group_dependency"] = "Leader";
  return out;
}

double FilterPrunerOptions::fraction(int64_t epoch, const PolicyTiming& timing) const {
  return agp_ ? agp_target(initial_sparsity_, final_sparsity_, epoch, timing) : desired_sparsity_;
}

}  // namespace igb::compress
