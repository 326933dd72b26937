// igb-bench's plan: the runs to train, test and compare (docs/igb-bench.md).
#include "options/bench/bench_plan.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/yaml_reader.h"
#include "models/eval_layout.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

/// Options the bench sets itself.
const std::set<std::string> kManaged = {"out", "resume", "optform", "config"};

/// Reads the run keys shared by `defaults` and each run into `run` (values given replace it).
void read_run_fields(YamlReader& r, BenchRun& run, const fs::path& plan_dir) {
  run.optform = r.get<std::string>("optform", run.optform);
  run.model = r.get<std::string>("model", run.model);
  run.data = r.get<std::string>("data", run.data);
  run.epochs = r.get<int64_t>("epochs", run.epochs);
  if (run.epochs < 0) throw InputError(r.where("epochs") + ": epochs must be positive");
  if (r.has("compress")) {
    const auto c = r.get<std::string>("compress");
    run.compress =
        c.empty() || fs::path(c).is_absolute() ? c : (plan_dir / c).lexically_normal().string();
  }
  const YAML::Node opts = r.node("options");
  if (!opts || opts.IsNull()) return;
  if (!opts.IsMap())
    throw InputError(r.where("options") +
                     ": options is a mapping of igb-train option names to values, not " +
                     yaml_describe(opts));
  for (const auto& kv : opts) {
    std::string key = yaml_scalar(r.file(), kv.first, "an option name");
    while (!key.empty() && key[0] == '-') key.erase(0, 1);
    const std::string where = yaml_where(r.file(), kv.first);
    if (kManaged.count(key))
      throw InputError(where + ": option '" + key + "' is the bench's own (" +
                       (key == "optform" ? "use the optform key" : "set by igb-bench") + ")");
    // A later value for a key replaces the defaults' values for it.
    run.options.erase(std::remove_if(run.options.begin(), run.options.end(),
                                     [&](const auto& o) { return o.first == key; }),
                      run.options.end());
    const YAML::Node& v = kv.second;
    if (v.IsSequence()) {
      for (const auto& e : v)
        run.options.emplace_back(key, yaml_scalar(r.file(), e, "options." + key));
    } else if (v.IsNull()) {
      throw InputError(where + ": options." + key + " has no value (a flag takes true)");
    } else {
      const std::string s = yaml_scalar(r.file(), v, "options." + key);
      if (s == "true" || s == "True")
        run.options.emplace_back(key, "");
      else if (s != "false" && s != "False")
        run.options.emplace_back(key, s);
    }
  }
}

}  // namespace

std::vector<std::string> BenchRun::train_args() const {
  std::vector<std::string> a = {"--optform=" + optform};
  if (!model.empty()) a.insert(a.end(), {"--model", model});
  if (!data.empty()) a.insert(a.end(), {"--data", data});
  if (epochs > 0) a.insert(a.end(), {"--epochs", std::to_string(epochs)});
  if (!compress.empty()) a.insert(a.end(), {"--compress", compress});
  for (const auto& [k, v] : options) {
    a.push_back("--" + k);
    if (!v.empty()) a.push_back(v);
  }
  return a;
}

BenchPlan load_bench_plan(const std::string& file) {
  if (!fs::exists(file)) throw InputError("--plan " + file + " does not exist");
  if (!fs::is_regular_file(file)) throw InputError("--plan " + file + " is not a file");
  const YAML::Node root = load_yaml_file(file);
  if (!root.IsMap())
    throw InputError(file + ": a bench plan is a mapping with 'runs' (see docs/igb-bench.md)");
  const fs::path plan_dir = fs::path(file).parent_path();
  YamlReader top(root, file, "plan");
  BenchPlan plan;
  plan.file = file;
  plan.title = top.get<std::string>("title", fs::path(file).stem().string());
  BenchRun defaults;
  if (const auto d = top.node("defaults"); d && !d.IsNull()) {
    if (!d.IsMap()) throw InputError(top.where("defaults") + ": defaults is a mapping");
    YamlReader r(d, file, "defaults");
    read_run_fields(r, defaults, plan_dir);
    r.finish();
  }
  if (const auto l = top.node("latency"); l && !l.IsNull()) {
    if (!l.IsMap()) throw InputError(top.where("latency") + ": latency is a mapping");
    YamlReader r(l, file, "latency");
    plan.latency_batch = r.get<int64_t>("batch_size", plan.latency_batch);
    plan.latency_repeats = r.get<int64_t>("repeats", plan.latency_repeats);
    r.finish();
    if (plan.latency_batch < 1 || plan.latency_batch > 4096)
      throw InputError(r.where("batch_size") + ": latency.batch_size must be in 1 ... 4096");
    if (plan.latency_repeats < 1 || plan.latency_repeats > 1000)
      throw InputError(r.where("repeats") + ": latency.repeats must be in 1 ... 1000");
  }
  const YAML::Node runs = top.node("runs");
  top.finish();
  if (!runs || !runs.IsSequence() || runs.size() == 0)
    throw InputError(file + ": 'runs' must be a non-empty list of runs");
  const std::regex name_re("[A-Za-z0-9_.-]+");
  std::map<std::string, std::string> seen;
  for (size_t i = 0; i < runs.size(); ++i) {
    const YAML::Node& n = runs[i];
    const std::string where = yaml_where(file, n);
    if (!n.IsMap()) throw InputError(where + ": runs[" + std::to_string(i) + "] is not a mapping");
    YamlReader r(n, file, "runs[" + std::to_string(i) + "]");
    BenchRun run = defaults;
    run.where = where;
    run.name = r.get<std::string>("name");
    if (!std::regex_match(run.name, name_re) || run.name == "." || run.name == "..")
      throw InputError(r.where("name") + ": run name '" + run.name +
                       "' must be letters, digits, '_', '-' and '.' (it names a folder)");
    if (run.name == "logs")
      throw InputError(r.where("name") + ": run name 'logs' is the bench's log folder");
    if (seen.count(run.name))
      throw InputError(r.where("name") + ": run name '" + run.name + "' is used twice (first at " +
                       seen[run.name] + ")");
    seen[run.name] = where;
    read_run_fields(r, run, plan_dir);
    r.finish();
    if (run.optform.empty())
      throw InputError(where + ": run '" + run.name + "' has no optform (here or in defaults)");
    try {
      models::family_layout(run.optform);
    } catch (const InputError& e) {
      throw InputError(where + ": run '" + run.name + "': " + e.what());
    }
    plan.runs.push_back(std::move(run));
  }
  return plan;
}

}  // namespace igb::options
