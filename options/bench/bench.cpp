// igb-bench: trains and tests every run of a plan as separate igb-train / igb-test processes,
// measures each final model with igb-tools, and compares them in one table and two plots.
#include "options/bench/bench.h"

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

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/progress.h"
#include "core/subprocess.h"
#include "core/table.h"
#include "core/text.h"
#include "models/eval_layout.h"
#include "options/bench/bench_plan.h"
#include "options/bench/bench_progress.h"
#include "options/bench/bench_report.h"
#include "options/bench/run_files.h"

namespace igb::options {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& p) { return read_json_or_null(p); }

/// What one run has reached; `bench_run.json` in its folder.
struct RunState : BenchRunRecord {
  enum Stage { kTrain, kTest, kMeasure, kDone } stage = kTrain;
  pid_t pid = -1;
  int64_t planned_epochs = 0;
  std::chrono::steady_clock::time_point started;
};

fs::path record_path(const RunState& s) { return s.dir / "bench_run.json"; }

void save_record(const RunState& s) {
  write_text_atomically(record_path(s), s.record.dump(2) + "\n");
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
    std::vector<const BenchRunRecord*> runs;
    for (const auto& st : states_) runs.push_back(&st);
    return write_bench_report(plan_, runs, out_, threads_) ? kExitFailure : kExitOk;
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
    // A run another process still trains (an igb-train left by a bench that was killed before
    // this one) would be written by two; igb-train holds its run directory's lock while it writes.
    for (const auto& r : plan_.runs)
      if (fs::is_directory(out_ / r.name) && !FolderLock::try_lock(out_ / r.name))
        throw InputError("run '" + r.name + "': " + (out_ / r.name).string() +
                         " is being written by another process (a training still running); stop "
                         "it before resuming the bench");
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
      s.planned_epochs = planned_epochs(r);
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
      // The report sets' columns come from training's summary (its best checkpoint, scored
      // after the last epoch); the test scores the final checkpoint on the run's data only.
      if (!models::family_layout(s.run->optform).report_sets.empty())
        argv.insert(argv.end(), {"--also-eval", "none"});
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
      // Every run counts, started or not: a run not started yet trains all its epochs.
      epochs_done += e ? (s.stage == RunState::kTrain ? e->first : e->second)
                       : (s.stage == RunState::kTrain ? 0 : s.planned_epochs);
      epochs_total += e ? e->second : s.planned_epochs;
    }
    if (epochs_at_start_ < 0) epochs_at_start_ = epochs_done;
    const std::string eta = plan_eta(elapsed, epochs_at_start_, epochs_done, epochs_total);
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
  /// Epochs trained before this bench started (a resumed one): not part of its pace.
  int64_t epochs_at_start_ = -1;
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
  if (parse_command_line(app, argc, argv)) return kExitOk;
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
