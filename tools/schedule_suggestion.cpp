#include "tools/schedule_suggestion.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/fs.h"

namespace igb::tools {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

std::string number(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace

SensitivityTable read_sensitivity_csv(const fs::path& csv) {
  const std::string text = read_text_file(csv);
  SensitivityTable t;
  std::stringstream in(text);
  std::string line;
  int64_t n = 0;
  const std::string where = csv.string() + ":";
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto f = split_csv(line);
    if (n == 1) {
      if (f.size() < 3 || f[0] != "parameter" || f[1] != "sparsity")
        throw InputError(where + "1: the header is not 'parameter,sparsity,<metrics>'");
      t.metrics.assign(f.begin() + 2, f.end());
      continue;
    }
    if (f.size() != t.metrics.size() + 2)
      throw InputError(where + std::to_string(n) + ": " + std::to_string(f.size()) +
                       " fields, the header has " + std::to_string(t.metrics.size() + 2));
    std::vector<double> values;
    for (size_t i = 1; i < f.size(); ++i) {
      size_t used = 0;
      double v = 0;
      try {
        v = std::stod(f[i], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != f[i].size())
        throw InputError(where + std::to_string(n) + ": '" + f[i] + "' is not a number");
      values.push_back(v);
    }
    if (f[0].empty()) throw InputError(where + std::to_string(n) + ": no parameter name");
    if (!(values[0] >= 0 && values[0] < 1))
      throw InputError(where + std::to_string(n) + ": sparsity " + f[1] + " is outside [0, 1)");
    for (size_t i = 1; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        throw InputError(where + std::to_string(n) + ": " + t.metrics[i - 1] + " is " + f[i + 1] +
                         ", not a finite number");
    if (!t.rows.count(f[0])) t.parameters.push_back(f[0]);
    t.rows[f[0]].push_back({values[0], {values.begin() + 1, values.end()}});
  }
  if (t.metrics.empty()) throw InputError(csv.string() + ": empty sensitivity table");
  if (t.parameters.empty()) throw InputError(csv.string() + ": no rows");
  const fs::path json = csv.parent_path() / "sensitivity.json";
  if (fs::exists(json)) {
    try {
      t.mode = nlohmann::json::parse(read_text_file(json)).value("mode", "element");
    } catch (const nlohmann::json::exception&) {
      throw InputError(json.string() + ": not valid JSON");
    }
  }
  return t;
}

namespace {

/// The column of the budget's metric; InputError for an option the table cannot serve.
size_t check_suggest_options(const SensitivityTable& table, const SuggestOptions& o,
                             const std::string& metric) {
  const auto it = std::find(table.metrics.begin(), table.metrics.end(), metric);
  if (it == table.metrics.end())
    throw InputError("--metric " + metric + " is not in the table; it has " + join(table.metrics));
  if (o.kind != "agp" && o.kind != "sensitivity")
    throw InputError("--kind " + o.kind + " is not one of agp, sensitivity");
  if (o.kind == "sensitivity" && table.mode != "element")
    throw InputError("--kind sensitivity applies to an element sweep; this one pruned " +
                     table.mode + "s (use --kind agp)");
  if (o.start_epoch < 0 || o.end_epoch <= o.start_epoch)
    throw InputError("--epochs " + std::to_string(o.start_epoch) + ":" +
                     std::to_string(o.end_epoch) + ": the end must be after the start");
  if (o.end_epoch > kMaxEpochs)
    throw InputError("--epochs " + std::to_string(o.start_epoch) + ":" +
                     std::to_string(o.end_epoch) + ": a run has at most " +
                     std::to_string(kMaxEpochs) + " epochs (igb-train --epochs)");
  if (!(o.max_drop >= 0)) throw InputError("--max-drop must be at least 0");
  return static_cast<size_t>(it - table.metrics.begin());
}

/// Per parameter, the highest swept sparsity whose drop of metric `k` stays within the budget
/// (every level up to it within it too).
std::vector<SuggestedSparsity> choose_sparsities(const SensitivityTable& table, size_t k,
                                                 double max_drop, bool lower_is_better) {
  std::vector<SuggestedSparsity> out;
  for (const auto& p : table.parameters) {
    auto rows = table.rows.at(p);
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (rows.front().first != 0)
      throw InputError("the table has no sparsity-0 row of " + p + " (the sweep's level 0)");
    SuggestedSparsity c{p, 0, 0, rows.front().second[k]};
    for (const auto& [sparsity, values] : rows) {
      const double drop = lower_is_better ? values[k] - c.baseline : c.baseline - values[k];
      if (!(drop <= max_drop)) break;  // a NaN stops it too
      c.sparsity = sparsity;
      c.drop = drop;
    }
    out.push_back(c);
  }
  return out;
}

/// One AGP pruner per final sparsity, its weights those that reach it; returns the instance
/// names. Element sparsities are the sweep's levels up to the floor of level · size (0.5998 for
/// 0.6), so they group by two decimals; a filter or channel fraction (3/32 = 0.0938) is kept as it
/// is, since rounding it could change the number of structures pruned.
std::vector<std::string> write_agp_pruners(std::ostream& y, const SensitivityTable& table,
                                           const std::vector<SuggestedSparsity>& choices,
                                           double initial_sparsity) {
  std::map<std::string, std::vector<std::string>> groups;
  std::vector<std::string> order, instances;
  for (const auto& c : choices) {
    if (c.sparsity <= 0) continue;
    const std::string key = table.mode == "element" && c.sparsity >= 0.01
                                ? number(std::round(c.sparsity * 100) / 100, 4)
                                : number(c.sparsity, 4);
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(c.parameter);
  }
  std::sort(order.begin(), order.end());
  for (size_t g = 0; g < order.size(); ++g) {
    const double final_sparsity = std::stod(order[g]);
    const std::string name = "agp_" + std::to_string(g);
    instances.push_back(name);
    y << "  " << name << ":\n";
    if (table.mode == "element") {
      y << "    class: AutomatedGradualPruner\n";
    } else {
      y << "    class: L1RankedStructureParameterPruner_AGP\n"
        << "    group_type: " << (table.mode == "filter" ? "Filters" : "Channels") << "\n";
    }
    y << "    initial_sparsity: " << number(std::min(initial_sparsity, final_sparsity / 2), 4)
      << "\n"
      << "    final_sparsity: " << number(final_sparsity, 4) << "\n    weights:\n";
    for (const auto& w : groups[order[g]]) y << "      - " << w << "\n";
  }
  return instances;
}

/// One SensitivityPruner whose s per parameter prunes its chosen sparsity: the quantile of |w|
/// over std(w) from the weights when given, else from a normal approximation. Returns the
/// instance names (none when nothing is pruned).
std::vector<std::string> write_sensitivity_pruner(
    std::ostream& y, const std::vector<SuggestedSparsity>& choices,
    const std::map<std::string, at::Tensor>& weights) {
  bool any = false;
  for (const auto& c : choices) any |= c.sparsity > 0;
  if (!any) return {};
  y << "  sensitivity_pruner:\n    class: SensitivityPruner\n    sensitivities:\n";
  for (const auto& c : choices) {
    if (c.sparsity <= 0) continue;
    double mult =
        std::sqrt(2.0) * at::erfinv(at::scalar_tensor(c.sparsity, at::kDouble)).item<double>();
    std::string how = "normal approximation";
    if (auto w = weights.find(c.parameter); w != weights.end()) {
      const auto a = w->second.detach().to(at::kCPU, at::kDouble).abs().flatten();
      const double sd = w->second.detach().to(at::kCPU, at::kDouble).std().item<double>();
      if (sd > 0) {
        mult = at::quantile(a, c.sparsity).item<double>() / sd;
        how = "from the weights";
      }
    }
    y << "      " << c.parameter << ": " << number(mult, 4) << "  # sparsity "
      << number(c.sparsity, 2) << ", s " << how << "\n";
  }
  return {"sensitivity_pruner"};
}

}  // namespace

ScheduleSuggestion suggest_schedule(const SensitivityTable& table, const SuggestOptions& o) {
  const std::string metric = o.metric.empty() ? table.metrics.front() : o.metric;
  const size_t k = check_suggest_options(table, o, metric);
  ScheduleSuggestion s;
  s.choices = choose_sparsities(table, k, o.max_drop, /*lower_is_better=*/metric == "loss");

  std::ostringstream y;
  y << "# Suggested by igb-tools suggest-schedule"
    << (o.source.empty() ? std::string() : " from " + o.source) << ": the highest sparsity per\n"
    << "# parameter whose one-shot " << table.mode << " pruning costs at most " << o.max_drop << " "
    << metric << " (drop at that sparsity,\n# measured without fine-tuning).\n";
  for (const auto& c : s.choices)
    y << "#   " << c.parameter << ": " << number(c.sparsity, 2) << " (" << metric << " "
      << number(c.baseline, 4) << ", drop " << number(c.drop, 4) << ")\n";
  y << "version: 1\npruners:\n";
  const auto instances = o.kind == "agp"
                             ? write_agp_pruners(y, table, s.choices, o.initial_sparsity)
                             : write_sensitivity_pruner(y, s.choices, o.weights);
  std::ostringstream budget;
  budget << o.max_drop;
  if (instances.empty())
    throw InputError("no parameter stays within --max-drop " + budget.str() + " " + metric +
                     " at any sparsity above 0 of the sweep, so there is nothing to prune; no "
                     "schedule written (raise --max-drop, or sweep finer levels)");
  y << "policies:\n";
  for (const auto& name : instances) {
    y << "  - pruner:\n      instance_name: " << name << "\n    starting_epoch: " << o.start_epoch;
    if (o.kind == "agp")
      y << "\n    ending_epoch: " << o.end_epoch << "\n    frequency: " << o.frequency << "\n";
    else
      y << "\n    ending_epoch: " << o.start_epoch + 1 << "\n    frequency: 1\n";
  }
  s.yaml = y.str();
  return s;
}

}  // namespace igb::tools
