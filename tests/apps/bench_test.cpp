// igb-bench end to end: a plan of tiny runs, the table against each run's own summary.json, a run
// that fails alone, a bench killed mid-plan and resumed, and plans that are refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/subprocess.h"
#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace {

namespace fs = std::filesystem;
using igb::test::run_app;
using nlohmann::json;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

const char* kPlan = R"(title: tiny bench
defaults:
  optform: sr
  data: synthetic
  epochs: 2
  options: {max-batches: 2, threads: 1, batch-size: 4}
latency: {batch_size: 2, repeats: 2}
runs:
  - name: fsrcnn
    model: fsrcnn
  - name: fsrcnn_agp
    model: fsrcnn
    compress: SCHEDULE
  - name: bad_lr
    model: espcn
    options: {lr: -1}
  - name: espcn
    model: espcn
)";

std::string plan_text() {
  std::string s = kPlan;
  s.replace(s.find("SCHEDULE"), 8, std::string(IGB_SOURCE_DIR) + "/schedules/sr/fsrcnn_agp.yaml");
  return s;
}

/// The children of `pid` (from /proc/*/stat, whose fourth field is the parent's pid).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == pid) out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

/// Whether `pid` is gone or a zombie nobody reaped yet (it ran its last instruction either way).
bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

const char* kLongPlan = R"(defaults:
  optform: sr
  model: fsrcnn
  data: synthetic
  epochs: 200
  options: {max-batches: 30, threads: 1, batch-size: 4}
latency: {batch_size: 2, repeats: 1}
runs:
  - {name: long}
)";

}  // namespace

// kill -9 of a bench takes its igb-train with it (it trained on alone, and a resumed bench raced
// it for the run directory); a resumed bench refuses a run directory another process writes.
TEST(Bench, AKilledBenchTakesItsTrainingAlongAndAResumeRefusesALiveWriter) {
  igb::test::TempDir tmp;
  write(tmp / "plan.yaml", kLongPlan);
  const fs::path out = tmp / "bench";
  const pid_t bench =
      igb::start_process({std::string(IGB_BIN_DIR) + "/igb-bench", "--plan",
                          (tmp / "plan.yaml").string(), "--out", out.string(), "--threads", "1"},
                         tmp / "bench.log");
  std::vector<pid_t> children;
  for (int i = 0; i < 6000 && (children.empty() || !fs::exists(out / "long" / "train.log")); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    children = children_of(bench);
  }
  ASSERT_EQ(children.size(), 1u) << read_file(tmp / "bench.log");
  ASSERT_TRUE(fs::exists(out / "long" / "train.log")) << read_file(tmp / "bench.log");
  kill(bench, SIGKILL);
  igb::wait_process(bench);
  // Its SIGTERM path removes the temporaries and dies: within a second, not after its epoch.
  bool gone = false;
  for (int i = 0; i < 10 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = dead(children[0]);
  }
  if (!gone) kill(children[0], SIGKILL);
  EXPECT_TRUE(gone) << "igb-train " << children[0] << " outlived its bench by 1 s";

  // A training still writing the run directory (started by hand here, as an orphan would be).
  const pid_t writer =
      igb::start_process({std::string(IGB_BIN_DIR) + "/igb-train", "--optform=sr", "--data",
                          "synthetic", "--epochs", "200", "--max-batches", "30", "--threads", "1",
                          "--overwrite", "--out", (out / "long").string()},
                         tmp / "writer.log");
  const auto log_size = [&] {
    std::error_code ec;
    const auto n = fs::file_size(out / "long" / "train.log", ec);
    return ec ? 0 : n;
  };
  const auto before = log_size();
  for (int i = 0; i < 6000 && log_size() <= before; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto r = run_app("igb-bench --plan " + (tmp / "plan.yaml").string() + " --out " + out.string() +
                   " --threads 1 --resume");
  kill(writer, SIGKILL);
  igb::wait_process(writer);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("run 'long': " + (out / "long").string() +
                          " is being written by another process"),
            std::string::npos)
      << r.output;
  // Two trainings given one --out: the second is refused before it writes.
  const pid_t first = igb::start_process(
      {std::string(IGB_BIN_DIR) + "/igb-train", "--optform=sr", "--data", "synthetic", "--epochs",
       "200", "--max-batches", "30", "--threads", "1", "--out", (tmp / "twice").string()},
      tmp / "first.log");
  for (int i = 0; i < 6000 && !fs::exists(tmp / "twice" / "train.log"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  r = run_app(
      "igb-train --optform=sr --data synthetic --epochs 1 --max-batches 1 --threads 1 "
      "--overwrite --out " +
      (tmp / "twice").string());
  kill(first, SIGKILL);
  igb::wait_process(first);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("is being written by another process"), std::string::npos) << r.output;
}

namespace {}  // namespace

// Every row of bench.json carries the numbers of its run's summary.json; bench.csv has the same
// rows; a bad option fails its run alone, with igb-train's error line; plots are real files.
TEST(Bench, TableMatchesEachRunsSummaryAndABadRunFailsAlone) {
  igb::test::TempDir tmp;
  write(tmp / "plan.yaml", plan_text());
  const fs::path out = tmp / "bench";
  auto r = run_app("igb-bench --plan " + (tmp / "plan.yaml").string() + " --out " + out.string() +
                   " --threads 1");
  EXPECT_EQ(r.code, 1) << r.output;  // one run failed
  EXPECT_NE(r.output.find("1 of 4 runs failed"), std::string::npos) << r.output;
  const json bench = read_json(out / "bench.json");
  ASSERT_EQ(bench["runs"].size(), 4u);
  EXPECT_EQ(bench["latency"]["threads"], 1);
  for (const auto& row : bench["runs"]) {
    const std::string name = row["run"];
    if (name == "bad_lr") {
      EXPECT_EQ(row["status"], "failed");
      EXPECT_EQ(row["error"], "igb-train: error: --lr must be > 0, not -1");
      continue;
    }
    EXPECT_EQ(row["status"], "ok") << name;
    const json summary = read_json(out / name / "summary.json");
    for (const char* key : {"psnr", "ssim", "bicubic_psnr", "params", "macs", "train_seconds"})
      EXPECT_EQ(row[key], summary[key]) << name << " " << key;
    EXPECT_DOUBLE_EQ(row["sparsity"].get<double>(), summary.value("sparsity", 0.0));  // none: dense
    EXPECT_EQ(row["checkpoint_bytes"], fs::file_size(out / name / "checkpoint.ckpt"));
    EXPECT_GT(row["latency_ms"]["1"].get<double>(), 0);
    EXPECT_GT(row["latency_ms"]["2"].get<double>(), 0);
    // The test of the final checkpoint agrees with the run's last validation (igb-test runs on
    // every core, training on one: sums in another order differ in float's last bits).
    EXPECT_NEAR(row["test"]["psnr"].get<double>(), summary["psnr"].get<double>(), 1e-4) << name;
  }
  // AGP zeroes weights: fewer non-zero parameters than parameters; a dense run has all.
  const auto& agp = bench["runs"][1];
  EXPECT_LT(agp["nonzero_params"].get<int64_t>(), agp["params"].get<int64_t>());
  EXPECT_GT(agp["sparsity"].get<double>(), 0);
  EXPECT_EQ(bench["runs"][0]["nonzero_params"], bench["runs"][0]["params"]);
  // The CSV: a header and one row per run, in plan order, the PSNR as the table prints it.
  const std::string csv = read_file(out / "bench.csv");
  EXPECT_EQ(csv.rfind("Run,Model,Status,PSNR (dB),", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nfsrcnn,fsrcnn,ok,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nbad_lr,espcn,\"failed: igb-train: error: --lr must be > 0, not -1\","),
            std::string::npos)
      << csv;
  char psnr[32];
  std::snprintf(psnr, sizeof psnr, ",%.2f,", bench["runs"][3]["psnr"].get<double>());
  EXPECT_NE(csv.find("\nespcn,espcn,ok" + std::string(psnr)), std::string::npos) << csv;
  // Plain numbers: the parameter count as digits alone, and no quotes but the failed run's error.
  EXPECT_NE(csv.find("," + std::to_string(bench["runs"][0]["params"].get<int64_t>()) + ","),
            std::string::npos)
      << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '"'), 2) << csv;
  // The report sets' columns: the run's own set (synthetic) under its name.
  EXPECT_NE(csv.find(",Synthetic PSNR (dB),Synthetic Bicubic PSNR (dB)"), std::string::npos) << csv;
  EXPECT_NE(read_file(out / "bench.md").find("| fsrcnn_agp | fsrcnn | ok |"), std::string::npos);
  for (const char* axis : {"macs", "latency"}) {
    const std::string png = read_file(out / ("bench_psnr_vs_" + std::string(axis) + ".png"));
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_NE(read_file(out / ("bench_psnr_vs_" + std::string(axis) + ".svg")).find("<svg"),
              std::string::npos);
  }
  // Without --resume an existing bench is not touched.
  const std::string before = read_file(out / "bench.json");
  auto again =
      run_app("igb-bench --plan " + (tmp / "plan.yaml").string() + " --out " + out.string());
  EXPECT_EQ(again.code, 2) << again.output;
  EXPECT_NE(again.output.find("already holds a bench"), std::string::npos) << again.output;
  EXPECT_EQ(read_file(out / "bench.json"), before);
}

// A bench killed (with its children) while the second run trains: --resume keeps the finished
// run as it was, continues the interrupted one from its checkpoint without repeating an epoch,
// and runs the rest.
TEST(Bench, ResumeAfterAKillFinishesTheRestWithoutRetraining) {
  igb::test::TempDir tmp;
  write(tmp / "plan.yaml", R"(defaults:
  optform: sr
  model: fsrcnn
  data: synthetic
  epochs: 4
  options: {max-batches: 30, threads: 1, batch-size: 4}
latency: {batch_size: 2, repeats: 1}
runs:
  - {name: first}
  - {name: second}
  - {name: third, epochs: 2}
)");
  const fs::path out = tmp / "bench";
  const std::string cmd = std::string(IGB_BIN_DIR) + "/igb-bench --plan " +
                          (tmp / "plan.yaml").string() + " --out " + out.string() + " --threads 1";
  // In a session of its own, so that the bench and its igb-train die together.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setsid();
    execl("/bin/sh", "sh", "-c", (cmd + " > " + (tmp / "first.log").string() + " 2>&1").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  bool reached = false;
  // Up to 10 minutes: a sanitizer build runs the bench many times slower.
  for (int i = 0; i < 6000 && !reached; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reached = fs::exists(out / "second" / "checkpoint.ckpt") &&
              fs::exists(out / "first" / "bench_run.json");
  }
  kill(-pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_TRUE(reached) << read_file(tmp / "first.log");
  EXPECT_FALSE(fs::exists(out / "bench.json"));
  const std::string first_log = read_file(out / "first" / "train.log");
  const std::string first_ckpt = read_file(out / "first" / "checkpoint.ckpt");

  auto r = run_app("igb-bench --plan " + (tmp / "plan.yaml").string() + " --out " + out.string() +
                   " --threads 1 --resume");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("second: resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("first: trained"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(out / "first" / "train.log"), first_log);
  EXPECT_EQ(read_file(out / "first" / "checkpoint.ckpt"), first_ckpt);
  const json bench = read_json(out / "bench.json");
  ASSERT_EQ(bench["runs"].size(), 3u);
  for (const auto& row : bench["runs"]) EXPECT_EQ(row["status"], "ok") << row.dump();
  // One metrics row per epoch: none repeated by the resumed run.
  for (const auto& [name, epochs] : {std::pair<const char*, int>{"second", 4}, {"third", 2}}) {
    std::ifstream csv(out / name / "metrics.csv");
    int lines = 0;
    for (std::string l; std::getline(csv, l);) lines += !l.empty();
    EXPECT_EQ(lines, epochs + 1) << name;
  }
  // A plan whose run changed does not resume into the old results.
  write(tmp / "changed.yaml", read_file(tmp / "plan.yaml") + "  - {name: fourth}\n");
  std::string changed = read_file(tmp / "changed.yaml");
  changed.replace(changed.find("epochs: 2"), 9, "epochs: 3");
  write(tmp / "changed.yaml", changed);
  auto c = run_app("igb-bench --plan " + (tmp / "changed.yaml").string() + " --out " +
                   out.string() + " --resume");
  EXPECT_EQ(c.code, 2) << c.output;
  EXPECT_NE(c.output.find("run 'third' is not the run"), std::string::npos) << c.output;
}

TEST(Bench, BadPlansNameFileAndLine) {
  igb::test::TempDir tmp;
  const fs::path plan = tmp / "p.yaml";
  const auto error_of = [&](const std::string& text) {
    write(plan, text);
    auto r = run_app("igb-bench --plan " + plan.string() + " --out " + (tmp / "o").string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_FALSE(fs::exists(tmp / "o"));
    return r.output;
  };
  EXPECT_NE(error_of("runs:\n  - {name: a, optform: sr, epoch: 2}\n")
                .find(plan.string() + ":2: unknown key 'epoch' in runs[0]"),
            std::string::npos)
      << error_of("runs:\n  - {name: a, optform: sr, epoch: 2}\n");
  EXPECT_NE(error_of("runs:\n  - {name: a, optform: sr}\n  - {name: a, optform: sr}\n")
                .find(":3: run name 'a' is used twice"),
            std::string::npos);
  EXPECT_NE(error_of("defaults: {optform: sr}\nruns:\n  - name: a\n    options: {out: x}\n")
                .find("option 'out' is the bench's own"),
            std::string::npos);
  EXPECT_NE(error_of("runs: []\n").find("'runs' must be a non-empty list"), std::string::npos);
  EXPECT_NE(error_of("runs:\n  - {name: a}\n").find("run 'a' has no optform"), std::string::npos);
  auto missing = run_app("igb-bench --plan " + (tmp / "none.yaml").string() + " --out " +
                         (tmp / "o").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.output.find("igb-bench: error: --plan " + (tmp / "none.yaml").string() +
                                " does not exist"),
            std::string::npos)
      << missing.output;
}

// The shipped plans load, name schedules that exist, and say what they would run.
TEST(Bench, ShippedPlansAreValid) {
  for (const char* plan : {"sr_models", "fsrcnn_compression", "cifar_resnet"}) {
    auto r = run_app("igb-bench --dry-run --out /nonexistent/bench --plan " +
                     std::string(IGB_SOURCE_DIR) + "/schedules/bench/" + plan + ".yaml");
    EXPECT_EQ(r.code, 0) << plan << "\n" << r.output;
    EXPECT_NE(r.output.find(": igb-train --optform="), std::string::npos) << r.output;
  }
  auto sr = run_app("igb-bench --dry-run --out b --plan " + std::string(IGB_SOURCE_DIR) +
                    "/schedules/bench/sr_models.yaml");
  EXPECT_NE(sr.output.find("vdsr: igb-train --optform=sr --model vdsr --data synthetic --epochs 2 "
                           "--upscale 3 --patch-size 48 --max-batches 50 --lr 0.001 --out b/vdsr"),
            std::string::npos)
      << sr.output;
}
