#include "tools/sensitivity.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>

#include "compress/channel_groups.h"
#include "compress/masks.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/table.h"
#include "tools/plot.h"

namespace igb::tools {

namespace fs = std::filesystem;

SensitivityMode parse_sensitivity_mode(const std::string& s) {
  if (s == "element") return SensitivityMode::kElement;
  if (s == "filter") return SensitivityMode::kFilter;
  if (s == "channel") return SensitivityMode::kChannel;
  throw InputError("sensitivity mode '" + s + "' is not one of element, filter, channel");
}

std::string sensitivity_mode_name(SensitivityMode m) {
  switch (m) {
    case SensitivityMode::kElement:
      return "element";
    case SensitivityMode::kFilter:
      return "filter";
    case SensitivityMode::kChannel:
      return "channel";
  }
  return "element";
}

namespace {

double parse_level(const std::string& item, const std::string& text) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != item.size() || !std::isfinite(v))
    throw InputError("levels '" + text + "': '" + item + "' is not a number");
  return v;
}

}  // namespace

std::vector<double> parse_sensitivity_levels(const std::string& text) {
  std::vector<double> levels;
  if (text.find(':') != std::string::npos) {
    std::vector<std::string> parts;
    std::stringstream in(text);
    for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
    if (parts.size() != 3) throw InputError("levels '" + text + "' is not FROM:TO:STEP");
    const double from = parse_level(parts[0], text), to = parse_level(parts[1], text),
                 step = parse_level(parts[2], text);
    if (!(step > 0) || to < from)
      throw InputError("levels '" + text + "': STEP must be positive and TO at least FROM");
    const double n = std::floor((to - from) / step + 1e-9);
    if (n + 1 > static_cast<double>(kMaxSensitivityLevels))
      throw InputError("levels '" + text + "' gives " + fixed(n + 1, 0) + " levels; at most " +
                       std::to_string(kMaxSensitivityLevels) + " (a sweep evaluates each)");
    for (int64_t i = 0; i <= static_cast<int64_t>(n); ++i)
      levels.push_back(std::round((from + static_cast<double>(i) * step) * 1e9) / 1e9);
  } else {
    std::stringstream in(text);
    for (std::string p; std::getline(in, p, ',');) levels.push_back(parse_level(p, text));
  }
  if (levels.empty()) throw InputError("levels '" + text + "' gives no level");
  if (levels.size() > static_cast<size_t>(kMaxSensitivityLevels))
    throw InputError("levels '" + text + "' gives " + std::to_string(levels.size()) +
                     " levels; at most " + std::to_string(kMaxSensitivityLevels));
  for (double l : levels)
    if (l < 0 || l >= 1)
      throw InputError("levels '" + text + "': " + fixed(l, 4) + " is outside [0, 1)");
  return levels;
}

std::vector<std::string> sensitivity_parameters(const torch::nn::Module& model,
                                                const graph::SummaryGraph& graph,
                                                const SensitivityOptions& options) {
  std::regex re;
  try {
    re = std::regex(options.params().empty() ? std::string(".*") : options.params(),
                    std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InputError("--params '" + options.params() + "' is not a valid regex: " + e.what());
  }
  const auto params = model.named_parameters();
  std::vector<std::string> names;
  for (const auto& op : graph.ops()) {
    if (op.op_kind != graph::OpKind::kConv && op.op_kind != graph::OpKind::kConvTranspose &&
        op.op_kind != graph::OpKind::kLinear)
      continue;
    const std::string w = op.param("weight");
    const auto* t = w.empty() ? nullptr : params.find(w);
    if (!t) continue;
    const int64_t dim = t->dim();
    if (dim != 4 && (dim != 2 || options.mode() != SensitivityMode::kElement)) continue;
    if (!std::regex_search(w, re)) continue;
    if (std::find(names.begin(), names.end(), w) == names.end()) names.push_back(w);
  }
  if (names.empty())
    throw InputError(
        "no " +
        std::string(options.mode() == SensitivityMode::kElement ? "conv or linear weight"
                                                                : "4-D conv weight") +
        (options.params().empty() ? "" : " matching '" + options.params() + "'") + " to sweep");
  return names;
}

namespace {

/// The name of the op that reads `weight` as its weight.
std::string op_of(const graph::SummaryGraph& graph, const std::string& weight) {
  for (const auto& op : graph.ops())
    if (op.param("weight") == weight) return op.name;
  return "";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void check_sensitivity_options(const SensitivityOptions& options) {
  if (options.levels().empty()) throw InputError("a sensitivity sweep needs at least one level");
  if (options.with_dependencies() && options.mode() != SensitivityMode::kFilter)
    throw InputError("--with-dependencies applies to --mode filter only");
}

SensitivityResult sensitivity_sweep(torch::nn::Module& model, const graph::SummaryGraph& graph,
                                    const SensitivityOptions& options,
                                    const std::function<SensitivityMetrics()>& evaluate,
                                    const SensitivityProgress& progress) {
  check_sensitivity_options(options);
  const auto t0 = std::chrono::steady_clock::now();
  SensitivityResult r;
  r.mode = options.mode();
  r.with_dependencies = options.with_dependencies();
  r.levels = options.levels();
  r.parameters = sensitivity_parameters(model, graph, options);
  const int64_t total = 1 + static_cast<int64_t>(r.parameters.size() * options.levels().size());
  torch::NoGradGuard no_grad;
  auto params = model.named_parameters();

  auto run_evaluation = [&](const std::string& p, double level) {
    if (progress) progress(p, level, r.evaluations, total);
    const auto te = std::chrono::steady_clock::now();
    auto m = evaluate();
    r.evaluation_seconds += seconds_since(te);
    ++r.evaluations;
    return m;
  };
  r.baseline = run_evaluation("", 0);
  for (const auto& kv : r.baseline) r.metrics.push_back(kv.first);

  for (const auto& name : r.parameters) {
    at::Tensor weight = params[name];
    const std::string op = op_of(graph, name);
    std::map<int64_t, std::vector<compress::GroupMember>> group_of;  // filter → its group
    for (double level : options.levels()) {
      // Which structures go (ranked on the untouched weight), then which tensors change.
      at::Tensor mask;
      std::vector<int64_t> filters;
      switch (options.mode()) {
        case SensitivityMode::kElement:
          mask = compress::level_mask(weight, level);
          break;
        case SensitivityMode::kFilter:
        case SensitivityMode::kChannel: {
          const auto group = options.mode() == SensitivityMode::kFilter
                                 ? compress::GroupType::kFilters
                                 : compress::GroupType::kChannels;
          filters = compress::smallest_groups(compress::group_magnitudes(weight, group), level);
          mask = compress::group_mask(weight, group, filters);
          break;
        }
      }
      std::map<std::string, at::Tensor> saved = {{name, weight.clone()}};
      if (options.with_dependencies())
        for (int64_t f : filters) {
          if (!group_of.count(f)) group_of[f] = compress::channel_group(model, graph, op, f);
          for (const auto& m : group_of[f])
            if (!saved.count(m.tensor) && params.find(m.tensor))
              saved[m.tensor] = params[m.tensor].clone();
        }
      weight.mul_(mask.to(weight.dtype()));
      for (int64_t f : filters) {
        if (!options.with_dependencies()) break;
        for (const auto& m : group_of[f])
          if (auto* t = params.find(m.tensor)) t->select(m.dim, m.index).zero_();
      }
      SensitivityRow row;
      row.parameter = name;
      row.level = level;
      row.sparsity = compress::sparsity(weight);
      row.metrics = run_evaluation(name, level);
      for (auto& [tensor, copy] : saved) params[tensor].copy_(copy);
      r.rows.push_back(std::move(row));
    }
  }
  r.seconds = seconds_since(t0);
  return r;
}

std::string sensitivity_csv(const SensitivityResult& r) {
  std::string out = "parameter,sparsity";
  for (const auto& m : r.metrics) out += "," + m;
  out += "\n";
  char buf[64];
  for (const auto& row : r.rows) {
    std::snprintf(buf, sizeof buf, "%.6f", row.sparsity);
    out += row.parameter + "," + buf;
    for (const auto& kv : row.metrics) {
      std::snprintf(buf, sizeof buf, "%.6f", kv.second);
      out += std::string(",") + buf;
    }
    out += "\n";
  }
  return out;
}

nlohmann::json sensitivity_json(const SensitivityResult& r) {
  auto metrics_json = [](const SensitivityMetrics& m) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& kv : m)
      j[kv.first] = std::isfinite(kv.second) ? nlohmann::json(kv.second) : nlohmann::json(nullptr);
    return j;
  };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows)
    rows.push_back({{"parameter", row.parameter},
                    {"level", row.level},
                    {"sparsity", row.sparsity},
                    {"metrics", metrics_json(row.metrics)}});
  return {{"mode", sensitivity_mode_name(r.mode)},
          {"with_dependencies", r.with_dependencies},
          {"parameters", r.parameters},
          {"levels", r.levels},
          {"metrics", r.metrics},
          {"baseline", metrics_json(r.baseline)},
          {"evaluations", r.evaluations},
          {"seconds", r.seconds},
          {"evaluation_seconds", r.evaluation_seconds},
          {"rows", rows}};
}

std::vector<fs::path> write_sensitivity(const SensitivityResult& r, const fs::path& dir,
                                        const std::string& metric) {
  const std::string m = metric.empty() && !r.metrics.empty() ? r.metrics.front() : metric;
  const auto it = std::find(r.metrics.begin(), r.metrics.end(), m);
  if (it == r.metrics.end())
    throw InputError("metric '" + m + "' is not one of the sweep's: " + join(r.metrics));
  const size_t k = static_cast<size_t>(it - r.metrics.begin());
  LinePlot plot;
  plot.title = "Sensitivity (" + sensitivity_mode_name(r.mode) + " pruning" +
               (r.with_dependencies ? ", with dependencies" : "") + ")";
  plot.x_label = "sparsity of the parameter";
  plot.y_label = m;
  for (const auto& p : r.parameters) {
    PlotSeries s;
    s.name = p;
    for (const auto& row : r.rows)
      if (row.parameter == p) {
        s.x.push_back(row.sparsity);
        s.y.push_back(row.metrics.at(k).second);
      }
    plot.series.push_back(std::move(s));
  }
  fs::create_directories(dir);
  const std::vector<fs::path> paths = {dir / "sensitivity.csv", dir / "sensitivity.json",
                                       dir / "sensitivity.svg", dir / "sensitivity.png"};
  write_text_atomically(paths[0], sensitivity_csv(r));
  write_text_atomically(paths[1], sensitivity_json(r).dump(2) + "\n");
  write_text_atomically(paths[2], line_plot_svg(plot));
  write_text_atomically(paths[3], line_plot_png(plot));
  return paths;
}

}  // namespace igb::tools
