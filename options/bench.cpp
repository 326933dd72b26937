// igb-bench: trains and tests every run of a plan as separate igb-train / igb-test processes,
// measures each final model with igb-tools, and compares them in one table and two plots.
#include "options/bench.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "compress/yaml_reader.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/progress.h"
#include "core/subprocess.h"
#include "core/table.h"
#include "core/text.h"
#include "tools/plot.h"
#include "tools/report.h"

namespace igb::options {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

/// Options the bench sets itself.
const std::set<std::string> kManaged = {"out", "resume", "optform", "config"};

/// Reads the run keys shared by `defaults` and each run into `run` (values given replace it).
void read_run_fields(compress::YamlReader& r, BenchRun& run, const fs::path& plan_dir) {
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
                     compress::yaml_describe(opts));
  for (const auto& kv : opts) {
    std::string key = compress::yaml_scalar(r.file(), kv.first, "an option name");
    while (!key.empty() && key[0] == '-') key.erase(0, 1);
    const std::string where = compress::yaml_where(r.file(), kv.first);
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
        run.options.emplace_back(key, compress::yaml_scalar(r.file(), e, "options." + key));
    } else if (v.IsNull()) {
      throw InputError(where + ": options." + key + " has no value (a flag takes true)");
    } else {
      const std::string s = compress::yaml_scalar(r.file(), v, "options." + key);
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
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::Exception& e) {
    throw InputError(file + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (!root.IsMap())
    throw InputError(file + ": a bench plan is a mapping with 'runs' (see docs/igb-bench.md)");
  compress::check_duplicate_keys(root, file);
  const fs::path plan_dir = fs::path(file).parent_path();
  compress::YamlReader top(root, file, "plan");
  BenchPlan plan;
  plan.file = file;
  plan.title = top.get<std::string>("title", fs::path(file).stem().string());
  BenchRun defaults;
  if (const auto d = top.node("defaults"); d && !d.IsNull()) {
    if (!d.IsMap()) throw InputError(top.where("defaults") + ": defaults is a mapping");
    compress::YamlReader r(d, file, "defaults");
    read_run_fields(r, defaults, plan_dir);
    r.finish();
  }
  if (const auto l = top.node("latency"); l && !l.IsNull()) {
    if (!l.IsMap()) throw InputError(top.where("latency") + ": latency is a mapping");
    compress::YamlReader r(l, file, "latency");
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
    const std::string where = compress::yaml_where(file, n);
    if (!n.IsMap()) throw InputError(where + ": runs[" + std::to_string(i) + "] is not a mapping");
    compress::YamlReader r(n, file, "runs[" + std::to_string(i) + "]");
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
    plan.runs.push_back(std::move(run));
  }
  return plan;
}

namespace {

json read_json(const fs::path& p) {
  std::ifstream in(p);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json() : j;
}

/// What one run has reached; `bench_run.json` in its folder.
struct RunState {
  const BenchRun* run = nullptr;
  fs::path dir;  // the igb-train run directory
  json record = json::object();
  enum Stage { kTrain, kTest, kMeasure, kDone } stage = kTrain;
  pid_t pid = -1;
  std::chrono::steady_clock::time_point started;
};

fs::path record_path(const RunState& s) { return s.dir / "bench_run.json"; }

/// Whether the run directory holds a finished training: summary.json's epochs all have their
/// metrics.csv row (a row follows its epoch's checkpoint).
bool training_complete(const fs::path& dir) {
  const json summary = read_json(dir / "summary.json");
  if (!summary.is_object() || !summary.contains("epochs")) return false;
  std::ifstream csv(dir / "metrics.csv");
  std::string line;
  int64_t rows = -1;  // the header
  while (std::getline(csv, line))
    if (!line.empty()) ++rows;
  return rows >= summary.value("epochs", int64_t{1} << 40);
}

void save_record(const RunState& s) {
  write_text_atomically(record_path(s), s.record.dump(2) + "\n");
}

/// The line of a failed program's log that says why: its last "error:" line, else its last line.
std::string error_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find("error:") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
}

/// The last "==> epoch A/B" of a training log: (A + 1, B + 1), or nothing yet.
std::optional<std::pair<int64_t, int64_t>> last_epoch(const fs::path& log) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 8192);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  const size_t at = tail.rfind("==> epoch ");
  if (at == std::string::npos) return std::nullopt;
  long a = 0, b = 0;
  if (std::sscanf(tail.c_str() + at, "==> epoch %ld/%ld", &a, &b) != 2) return std::nullopt;
  return std::make_pair(static_cast<int64_t>(a) + 1, static_cast<int64_t>(b) + 1);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(" \t", c + 1));
    }
  return "unknown CPU";
}

/// One metric column: its summary.json key and header.
struct MetricColumn {
  const char* key;
  const char* header;
  int digits;
};
const MetricColumn kMetrics[] = {{"psnr", "PSNR (dB)", 2},
                                 {"ssim", "SSIM", 4},
                                 {"bicubic_psnr", "Bicubic PSNR (dB)", 2},
                                 {"blurred_psnr", "Blurred PSNR (dB)", 2},
                                 {"top1", "Top-1 (%)", 2},
                                 {"top5", "Top-5 (%)", 2}};

std::string number_or_blank(const json& j, const char* key, int digits) {
  return j.is_object() && j.contains(key) && j[key].is_number()
             ? fixed(j[key].get<double>(), digits)
             : "";
}

class Bench {
 public:
  Bench(BenchPlan plan, fs::path out, int64_t jobs, bool resume, int64_t threads)
      : plan_(std::move(plan)),
        out_(std::move(out)),
        jobs_(jobs),
        resume_(resume),
        threads_(threads),
        bin_(executable_dir()),
        terminal_(Progress::stderr_is_terminal()) {}

  int run() {
    prepare();
    start_ = std::chrono::steady_clock::now();
    train_and_test();
    measure();
    if (terminal_) std::cerr << "\r\033[K" << std::flush;
    return report();
  }

 private:
  /// Checks --out and the plan against what --out already holds; writes bench_plan.json.
  void prepare() {
    if (fs::exists(out_) && !fs::is_directory(out_))
      throw InputError("--out " + out_.string() + " is a file, not a folder");
    const fs::path recorded = out_ / "bench_plan.json";
    json commands = json::object();
    for (const auto& r : plan_.runs) commands[r.name] = r.train_args();
    if (fs::exists(recorded)) {
      if (!resume_)
        throw InputError("--out " + out_.string() +
                         " already holds a bench (bench_plan.json); --resume continues it, or "
                         "choose another --out");
      const json old = read_json(recorded);
      if (!old.is_object() || !old.contains("runs") || !old["runs"].is_object())
        throw InputError(recorded.string() + " is damaged (not a bench_plan.json)");
      for (const auto& r : plan_.runs)
        if (old["runs"].contains(r.name) && old["runs"][r.name] != commands[r.name])
          throw InputError(r.where + ": run '" + r.name + "' is not the run " + out_.string() +
                           " holds (its options changed); use another --out");
    } else if (resume_) {
      throw InputError("--resume: " + out_.string() + " holds no bench (no bench_plan.json)");
    }
    for (const char* p : {"igb-train", "igb-test", "igb-tools"})
      if (!fs::exists(bin_ / p))
        throw InputError(std::string(p) + " is not beside igb-bench in " + bin_.string());
    fs::create_directories(out_ / "logs");
    write_text_atomically(
        recorded,
        json{{"plan", plan_.file}, {"title", plan_.title}, {"runs", commands}}.dump(2) + "\n");
    for (const auto& r : plan_.runs) {
      RunState s;
      s.run = &r;
      s.dir = out_ / r.name;
      const json rec = read_json(record_path(s));
      if (resume_ && rec.is_object() && rec.value("status", "") == "ok") {
        s.record = rec;
        s.stage = RunState::kDone;
      } else if (resume_ &&
                 ((rec.is_object() && rec.value("trained", false)) || training_complete(s.dir))) {
        s.record = rec;
        s.stage = RunState::kTest;
      }
      s.record["name"] = r.name;
      states_.push_back(std::move(s));
    }
  }

  fs::path log_of(const RunState& s, const char* what) const {
    return out_ / "logs" / (s.run->name + "." + what + ".log");
  }

  void start(RunState& s) {
    std::vector<std::string> argv;
    if (s.stage == RunState::kTrain) {
      argv = {(bin_ / "igb-train").string()};
      const auto args = s.run->train_args();
      argv.insert(argv.end(), args.begin(), args.end());
      argv.insert(argv.end(), {"--out", s.dir.string()});
      if (fs::exists(s.dir / "checkpoint.ckpt")) {
        argv.insert(argv.end(), {"--resume", (s.dir / "checkpoint.ckpt").string()});
        note(s.run->name + ": resuming from " + (s.dir / "checkpoint.ckpt").string());
      }
      fs::remove(s.dir / "bench_run.json");
    } else {
      argv = {(bin_ / "igb-test").string(),
              "--optform=" + s.run->optform,
              "--checkpoint",
              (s.dir / "checkpoint.ckpt").string(),
              "--out",
              (s.dir / "bench_test").string()};
      if (!s.run->data.empty()) argv.insert(argv.end(), {"--data", s.run->data});
      fs::create_directories(s.dir / "bench_test");
    }
    const fs::path log = log_of(s, s.stage == RunState::kTrain ? "train" : "test");
    {
      std::ofstream head(log, std::ios::app);
      head << "$";
      for (const auto& a : argv) head << " " << a;
      head << "\n";
    }
    s.pid = start_process(argv, log);
    s.started = std::chrono::steady_clock::now();
  }

  /// A child of `s` has ended with `code`: the next stage, or the run's failure.
  void finished(RunState& s, int code) {
    const bool training = s.stage == RunState::kTrain;
    const fs::path log = log_of(s, training ? "train" : "test");
    s.pid = -1;
    if (code != 0) {
      s.record["status"] = "failed";
      s.record["error"] = error_line(log);
      s.record["failed_in"] = training ? "igb-train" : "igb-test";
      s.stage = RunState::kDone;
      save_record(s);
      note(s.run->name + ": FAILED: " + s.record["error"].get<std::string>());
      return;
    }
    if (training) {
      s.record["trained"] = true;
      s.stage = RunState::kTest;
      save_record(s);
      note(s.run->name + ": trained");
    } else {
      json test = read_json(s.dir / "bench_test" / "test_summary.json");
      if (test.is_object()) test.erase("per_image");  // in bench_test/test_summary.json
      s.record["test"] = test;
      s.stage = RunState::kMeasure;
      save_record(s);
    }
  }

  void train_and_test() {
    for (;;) {
      int64_t active = 0;
      for (auto& s : states_) active += s.pid > 0;
      for (auto& s : states_) {
        if (active >= jobs_) break;
        if (s.pid > 0 || (s.stage != RunState::kTrain && s.stage != RunState::kTest)) continue;
        start(s);
        ++active;
      }
      if (active == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (auto& s : states_)
        if (s.pid > 0)
          if (auto code = poll_process(s.pid)) finished(s, *code);
      show_progress();
    }
  }

  /// Latency, non-zero parameters and checkpoint size of every tested run, one at a time, with
  /// nothing else running.
  void measure() {
    for (auto& s : states_) {
      if (s.stage != RunState::kMeasure) continue;
      const fs::path ckpt = s.dir / "checkpoint.ckpt";
      const fs::path log = log_of(s, "measure");
      show_line("measuring " + s.run->name);
      const std::string threads = std::to_string(threads_);
      int code = wait_process(
          start_process({(bin_ / "igb-tools").string(), "profile", "--checkpoint", ckpt.string(),
                         "--batch-sizes", "1," + std::to_string(plan_.latency_batch), "--repeats",
                         std::to_string(plan_.latency_repeats), "--threads", threads, "--json",
                         (s.dir / "bench_profile.json").string()},
                        log));
      if (code == 0)
        code = wait_process(
            start_process({(bin_ / "igb-tools").string(), "sparsity", "--checkpoint", ckpt.string(),
                           "--json", (s.dir / "bench_sparsity.json").string()},
                          log));
      if (code != 0) {
        s.record["status"] = "failed";
        s.record["failed_in"] = "igb-tools";
        s.record["error"] = error_line(log);
        save_record(s);
        note(s.run->name + ": FAILED: " + s.record["error"].get<std::string>());
        continue;
      }
      const json prof = read_json(s.dir / "bench_profile.json");
      const json sp = read_json(s.dir / "bench_sparsity.json");
      json latency = json::object();
      if (prof.contains("batches"))
        for (const auto& b : prof["batches"])
          latency[std::to_string(b.value("batch", 0))] = b.value("forward_ms", 0.0);
      s.record["latency_ms"] = latency;
      s.record["latency_threads"] = prof.value("threads", threads_);
      s.record["checkpoint_bytes"] = static_cast<int64_t>(fs::file_size(ckpt));
      const json summary = read_json(s.dir / "summary.json");
      const int64_t params = summary.value("params", int64_t{0});
      s.record["nonzero_params"] =
          params - (sp.value("total_dense", int64_t{0}) - sp.value("total_nnz", int64_t{0}));
      s.record["status"] = "ok";
      s.stage = RunState::kDone;
      save_record(s);
    }
  }

  void note(const std::string& line) {
    if (terminal_) std::cerr << "\r\033[K";
    std::cerr << "igb-bench: " << line << std::endl;
    shown_.clear();
  }

  void show_line(const std::string& line) {
    if (terminal_) {
      std::cerr << "\r\033[K" << line << std::flush;
    } else if (line != shown_) {
      std::cerr << line << std::endl;
    }
    shown_ = line;
  }

  /// Which runs are going, at which epoch, and the ETA of the plan's training.
  void show_progress() {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    int64_t done = 0, epochs_done = 0, epochs_total = 0;
    std::string going;
    for (const auto& s : states_) {
      if (s.stage == RunState::kDone || s.stage == RunState::kMeasure) ++done;
      const auto e = last_epoch(log_of(s, "train"));
      if (s.pid > 0 && s.stage == RunState::kTrain)
        going += "  " + s.run->name + " epoch " +
                 (e ? std::to_string(e->first) + "/" + std::to_string(e->second)
                    : std::string("starting"));
      else if (s.pid > 0)
        going += "  " + s.run->name + " testing";
      if (e) {
        epochs_done += s.stage == RunState::kTrain ? e->first : e->second;
        epochs_total += e->second;
      } else {
        epochs_total += s.run->epochs > 0 ? s.run->epochs : 0;
      }
    }
    std::string eta;
    if (epochs_done > 0 && epochs_total > epochs_done)
      eta = "  ETA " + format_duration(elapsed / static_cast<double>(epochs_done) *
                                       static_cast<double>(epochs_total - epochs_done));
    const std::string line =
        "[" + std::to_string(done) + "/" + std::to_string(states_.size()) + " runs]" + going + eta;
    // Off a terminal, a line when the set of runs or a run's epoch changes, at most every 30 s.
    if (!terminal_) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_log_ < std::chrono::seconds(30) && done == logged_done_) return;
      last_log_ = now;
      logged_done_ = done;
    }
    show_line(line);
  }

  int report() {
    std::vector<const MetricColumn*> metrics;
    for (const auto& m : kMetrics)
      for (const auto& s : states_) {
        const json summary = read_json(s.dir / "summary.json");
        if (summary.is_object() && summary.contains(m.key)) {
          metrics.push_back(&m);
          break;
        }
      }
    const std::string cpu = cpu_name();
    const std::string batch = std::to_string(plan_.latency_batch);
    Table table;
    table.columns = {"Run", "Model", "Status"};
    for (const auto* m : metrics) table.columns.push_back(m->header);
    for (const char* c :
         {"Params", "Non-zero", "Sparsity (%)", "MACs", "Checkpoint (MB)", "Latency b1 (ms)"})
      table.columns.push_back(c);
    table.columns.push_back("Latency b" + batch + " (ms)");
    table.columns.push_back("Train (s)");
    json rows = json::array();
    int failed = 0;
    for (const auto& s : states_) {
      const json summary = read_json(s.dir / "summary.json");
      const json& rec = s.record;
      const std::string status = rec.value("status", "not run");
      failed += status != "ok";
      json row = {
          {"run", s.run->name},
          {"optform", s.run->optform},
          {"model", summary.is_object() ? summary.value("model", s.run->model) : s.run->model},
          {"status", status},
          {"run_dir", s.dir.string()},
          {"command", s.run->train_args()}};
      if (rec.contains("error")) row["error"] = rec["error"];
      std::vector<std::string> cells = {
          s.run->name, row["model"].get<std::string>(),
          status == "ok" ? "ok" : status + ": " + rec.value("error", "")};
      const bool ok = status == "ok" && summary.is_object();
      for (const auto* m : metrics) {
        cells.push_back(ok ? number_or_blank(summary, m->key, m->digits) : "");
        if (ok && summary.contains(m->key)) row[m->key] = summary[m->key];
      }
      if (ok) {
        const int64_t params = summary.value("params", int64_t{0});
        const int64_t nnz = rec.value("nonzero_params", params);
        const double sparsity = 100.0 * summary.value("sparsity", 0.0);
        const int64_t macs = summary.value("macs", int64_t{0});
        const double mb = static_cast<double>(rec.value("checkpoint_bytes", int64_t{0})) / 1e6;
        const json lat = rec.value("latency_ms", json::object());
        const double b1 = lat.value("1", kNan), bb = lat.value(batch, kNan);
        const double secs = summary.value("train_seconds", kNan);
        cells.insert(cells.end(), {tools::grouped(params), tools::grouped(nnz), fixed(sparsity, 2),
                                   tools::grouped(macs), fixed(mb, 3), fixed(b1, 3), fixed(bb, 3),
                                   fixed(secs, 1)});
        row.update({{"params", params},
                    {"nonzero_params", nnz},
                    {"sparsity", sparsity / 100},
                    {"macs", macs},
                    {"macs_input", summary.value("macs_input", json::array())},
                    {"checkpoint_bytes", rec.value("checkpoint_bytes", int64_t{0})},
                    {"latency_ms", lat},
                    {"train_seconds", secs},
                    {"test", rec.value("test", json())}});
      } else {
        cells.resize(table.columns.size());
      }
      table.rows.push_back(cells);
      rows.push_back(row);
    }
    const std::string threads = threads_ > 0 ? std::to_string(threads_)
                                             : std::to_string(std::thread::hardware_concurrency());
    const std::string measured = "latency: forward pass, median of " +
                                 std::to_string(plan_.latency_repeats) + " runs, " + threads +
                                 " thread(s), " + cpu;
    std::cout << plan_.title << "\n" << table.to_text() << measured << "\n";
    write_text_atomically(out_ / "bench.csv", table.to_csv());
    write_text_atomically(
        out_ / "bench.json",
        json{
            {"title", plan_.title},
            {"plan", plan_.file},
            {"cpu", cpu},
            {"latency",
             {{"batch_sizes", {1, plan_.latency_batch}},
              {"repeats", plan_.latency_repeats},
              {"threads", threads_ > 0 ? threads_ : int64_t(std::thread::hardware_concurrency())}}},
            {"runs", rows}}
                .dump(2) +
            "\n");
    write_text_atomically(out_ / "bench.md", markdown(table, measured));
    plots(rows);
    std::cout << "wrote " << (out_ / "bench.csv").string() << ", bench.json, bench.md and plots in "
              << out_.string() << "\n";
    if (failed) std::cout << failed << " of " << states_.size() << " runs failed\n";
    return failed ? kExitFailure : kExitOk;
  }

  std::string markdown(const Table& t, const std::string& measured) const {
    auto cell = [](std::string s) {
      for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
      return s;
    };
    std::ostringstream md;
    md << "## " << plan_.title << "\n\n|";
    for (const auto& c : t.columns) md << " " << cell(c) << " |";
    md << "\n|";
    for (size_t i = 0; i < t.columns.size(); ++i) md << (i < 3 ? "---|" : "---:|");
    md << "\n";
    for (const auto& r : t.rows) {
      md << "|";
      for (const auto& c : r) md << " " << cell(c) << " |";
      md << "\n";
    }
    md << "\n" << measured << "\n";
    return md.str();
  }

  /// Metric against MACs and against latency at batch 1, one labelled point per run; SR adds the
  /// bicubic and deblurring the blurred input's PSNR as a line.
  void plots(const json& rows) const {
    for (const char* metric : {"psnr", "top1"}) {
      std::vector<const json*> ok;
      for (const auto& r : rows)
        if (r.value("status", "") == "ok" && r.contains(metric)) ok.push_back(&r);
      if (ok.empty()) continue;
      const std::string label = std::string(metric) == "psnr" ? "PSNR (dB)" : "top-1 (%)";
      for (const char* axis : {"macs", "latency"}) {
        tools::LinePlot p;
        const bool macs = std::string(axis) == "macs";
        p.title = plan_.title + ": " + label + (macs ? " vs MACs" : " vs latency (batch 1)");
        p.x_label = macs ? "MACs (millions, log scale)" : "latency at batch 1 (ms, log scale)";
        p.log_x = true;
        p.y_label = label;
        double x_lo = INFINITY, x_hi = -INFINITY;
        for (const json* r : ok) {
          tools::PlotSeries s;
          s.name = (*r)["run"].get<std::string>();
          s.lines = false;
          const double x =
              macs ? (*r)["macs"].get<double>() / 1e6 : (*r)["latency_ms"].value("1", kNan);
          s.x = {x};
          s.y = {(*r)[metric].get<double>()};
          s.labels = {s.name};
          x_lo = std::min(x_lo, x);
          x_hi = std::max(x_hi, x);
          p.series.push_back(s);
        }
        // The baseline of the validation images (the same for every run on the same data).
        for (const char* base : {"bicubic_psnr", "blurred_psnr"}) {
          if (std::string(metric) != "psnr" || !std::isfinite(x_lo)) continue;
          for (const json* q : ok) {
            const json summary =
                read_json(fs::path((*q)["run_dir"].get<std::string>()) / "summary.json");
            if (!summary.contains(base)) continue;
            tools::PlotSeries line;
            line.name = std::string(base) == "bicubic_psnr" ? "bicubic" : "blurred input";
            line.x = {x_lo, x_hi};
            line.y = {summary[base].get<double>(), summary[base].get<double>()};
            p.series.push_back(line);
            break;
          }
        }
        const std::string stem = "bench_" + std::string(metric) + "_vs_" + axis;
        write_text_atomically(out_ / (stem + ".svg"), tools::line_plot_svg(p));
        write_text_atomically(out_ / (stem + ".png"), tools::line_plot_png(p));
      }
    }
  }

  BenchPlan plan_;
  fs::path out_;
  int64_t jobs_;
  bool resume_;
  int64_t threads_;
  fs::path bin_;
  bool terminal_;
  std::vector<RunState> states_;
  std::chrono::steady_clock::time_point start_, last_log_;
  int64_t logged_done_ = -1;
  std::string shown_;
};

}  // namespace

int bench_main(int argc, char** argv) {
  CLI::App app(
      "Train, test and measure every run of a plan (docs/igb-bench.md) as separate igb-train, "
      "igb-test and igb-tools processes, and compare them in one table (bench.csv, bench.json, "
      "bench.md) and two plots (metric vs MACs and vs latency).",
      "igb-bench");
  std::string plan_file, out;
  int64_t jobs = 1, threads = 0;
  bool resume = false;
  app.add_option("--plan", plan_file, "The plan (YAML): runs and shared defaults")->required();
  app.add_option("--out", out, "Folder of the bench: one run directory per run, logs, tables")
      ->required();
  app.add_option("--jobs", jobs, "Runs trained at once (latency is measured one run at a time)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{64}));
  app.add_option("--threads", threads,
                 "Threads of the latency measurement, the same for every run (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  bool dry_run = false;
  app.add_flag("--dry-run", dry_run,
               "Check the plan and print each run's igb-train command; run nothing, write nothing");
  app.add_flag("--resume", resume,
               "Continue the bench in --out: finished runs are kept, interrupted ones resume from "
               "their last checkpoint, failed ones run again");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  BenchPlan plan = load_bench_plan(plan_file);
  if (dry_run) {
    for (const auto& r : plan.runs) {
      if (!r.compress.empty() && !fs::is_regular_file(r.compress))
        throw InputError(r.where + ": run '" + r.name + "': compress schedule " + r.compress +
                         " does not exist");
      std::cout << r.name << ": igb-train";
      for (const auto& a : r.train_args()) std::cout << " " << a;
      std::cout << " --out " << (fs::path(out) / r.name).string() << "\n";
    }
    return kExitOk;
  }
  Bench bench(std::move(plan), out, jobs, resume, threads);
  return bench.run();
}

}  // namespace igb::options
