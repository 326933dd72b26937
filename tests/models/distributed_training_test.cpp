// Data-parallel training end to end: `igb-train --nproc 2` on loopback against one process with
// the combined batch, and a rank killed mid-epoch.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "core/checkpoint.h"
#include "core/subprocess.h"
#include "models/model.h"
#include "models/model_from_checkpoint.h"
#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace igb::models {

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Parameters and buffers of a checkpoint's model by name.
std::map<std::string, at::Tensor> state_of(const fs::path& checkpoint) {
  register_builtin_models();
  auto model = model_from_checkpoint(Checkpoint::load(checkpoint.string()));
  std::map<std::string, at::Tensor> state;
  for (const auto& p : model->named_parameters()) state[p.key()] = p.value();
  for (const auto& b : model->named_buffers()) state[b.key()] = b.value();
  return state;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The cells of a CSV file, row by row, without the last column (time_s).
std::vector<std::vector<std::string>> cells_without_last_column(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::vector<std::vector<std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) row.push_back(cell);
    if (!row.empty()) row.pop_back();
    rows.push_back(row);
  }
  return rows;
}

/// Two metrics files agree: the same header and rows, each number within 1e-5 relative (the two
/// jobs sum the same losses in another order, which can move the sixth decimal).
void expect_same_metrics(const std::string& a, const std::string& b) {
  const auto ra = cells_without_last_column(a), rb = cells_without_last_column(b);
  ASSERT_EQ(ra.size(), rb.size()) << a << "\n" << b;
  ASSERT_FALSE(ra.empty());
  EXPECT_EQ(ra[0], rb[0]);
  for (size_t i = 1; i < ra.size(); ++i) {
    ASSERT_EQ(ra[i].size(), rb[i].size()) << "row " << i;
    for (size_t j = 0; j < ra[i].size(); ++j) {
      const double x = std::stod(ra[i][j]), y = std::stod(rb[i][j]);
      EXPECT_LE(std::abs(x - y), 1e-5 * std::max(1.0, std::abs(x)))
          << ra[0][j] << " of row " << i << ": " << ra[i][j] << " against " << rb[i][j];
    }
  }
}

/// The pid of the child of `parent` whose environment has RANK=`rank`; -1 when none.
pid_t rank_process(pid_t parent, int rank) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const auto name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = read_file(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string state;
    pid_t ppid = 0;
    fields >> state >> ppid;
    if (ppid != parent) continue;
    const std::string env = read_file(entry.path() / "environ");
    if (env.find(std::string("RANK=") + std::to_string(rank) + '\0') == 0 ||
        env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return -1;
}

/// An AGP schedule from 20% to 50% sparsity over epochs 0-3 on `weights` (a YAML list's items).
void write_agp(const fs::path& path, const std::string& weights) {
  std::ofstream(path) << "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
                         "    initial_sparsity: 0.2\n    final_sparsity: 0.5\n    weights: ["
                      << weights
                      << "]\npolicies:\n  - pruner:\n      instance_name: p\n"
                         "    starting_epoch: 0\n    ending_epoch: 3\n    frequency: 1\n";
}

}  // namespace

TEST(DistributedTraining, TwoProcessesOfBatchBTrainAsOneProcessOfBatch2B) {
  // SGD with momentum, 2 epochs of 4 steps: FSRCNN dense and under AGP pruning at every epoch,
  // and LeNet-5 whose second conv loses half its filters at epoch 1 by the APoZ of its ReLU, a
  // statistic of each rank's own activations that the job averages. Neither model has
  // BatchNorm, so both runs compute the same gradients up to the order of float sums.
  test::TempDir tmp;
  write_agp(tmp / "agp.yaml", "mid_part.1.weight, mid_part.3.weight");
  std::ofstream(tmp / "apoz.yaml") << "version: 1\n"
                                      "pruners:\n"
                                      "  p:\n"
                                      "    class: ActivationAPoZRankedFilterPruner\n"
                                      "    group_type: Filters\n"
                                      "    desired_sparsity: 0.5\n"
                                      "    weights: [conv2.weight]\n"
                                      "policies:\n"
                                      "  - pruner:\n"
                                      "      instance_name: p\n"
                                      "    epochs: [1]\n";
  struct Case {
    std::string name, args, pruned_weight;
    double sparsity;
  };
  const std::vector<Case> cases{
      {"dense", "--optform=sr --data synthetic --model fsrcnn --lr 0.002", "", 0},
      {"agp",
       "--optform=sr --data synthetic --model fsrcnn --lr 0.002 --compress " +
           (tmp / "agp.yaml").string(),
       "mid_part.1.weight", 0.46},
      {"apoz",
       "--optform=classify --model lenet5 --lr 0.01 --compress " + (tmp / "apoz.yaml").string(),
       "conv2.weight", 0.49}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string common = "igb-train " + c.args +
                               " --optimizer sgd --lr-decay none --epochs 2 --max-batches 4 "
                               "--workers 0 --threads 1 --seed 5";
    const auto one = tmp / ("one_" + c.name), two = tmp / ("two_" + c.name);
    const auto r1 = test::run_app(common + " --batch-size 8 --out " + one.string());
    ASSERT_EQ(r1.code, 0) << r1.output;
    const auto r2 = test::run_app(common + " --batch-size 4 --nproc 2 --out " + two.string());
    ASSERT_EQ(r2.code, 0) << r2.output;

    const auto a = state_of(one / "checkpoint.ckpt"), b = state_of(two / "checkpoint.ckpt");
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (const auto& [name, t] : a) {
      ASSERT_TRUE(b.count(name)) << name;
      worst = std::max(worst, (t - b.at(name)).abs().max().item<double>());
    }
    EXPECT_LT(worst, 1e-5);
    if (!c.pruned_weight.empty()) {
      // The schedule pruned: AGP's 46% target of epoch 1, and 8 of conv2's 16 filters (50%).
      const auto& w = a.at(c.pruned_weight);
      const double zeros = (w == 0).sum().item<double>() / static_cast<double>(w.numel());
      EXPECT_GT(zeros, c.sparsity) << c.pruned_weight;
    }

    // Only rank 0 wrote: one event file, one metrics row per epoch, one log line per epoch.
    int events = 0;
    for (const auto& e : fs::directory_iterator(two))
      events += e.path().filename().string().rfind("events.out.tfevents", 0) == 0;
    EXPECT_EQ(events, 1);
    const auto log = read_file(two / "train.log");
    EXPECT_EQ(count(log, "==> epoch 1/1"), 1u);
    EXPECT_EQ(count(log, "data-parallel over 2 processes: batch 4 each, 8 a step in all"), 1u);
    EXPECT_EQ(count(log, "gradient all-reduce over 2 processes: "), 1u);
    EXPECT_EQ(count(read_file(two / "metrics.csv"), "\n"), 3u);
    // Both runs report the same loss, metrics and sparsity (all but the last column, time_s).
    expect_same_metrics(read_file(one / "metrics.csv"), read_file(two / "metrics.csv"));
  }
}

TEST(DistributedTraining, AResumedJobContinuesAsTheUninterruptedJob) {
  // Two processes under AGP pruning with SGD momentum: 3 epochs in one go, against 1 epoch and a
  // resume to 3 (both epochs after the checkpoint's, the data order, masks and momentum restored).
  test::TempDir tmp;
  write_agp(tmp / "agp.yaml", "mid_part.1.weight");
  const std::string common =
      "igb-train --optform=sr --data synthetic --model fsrcnn --lr 0.002 --optimizer sgd "
      "--lr-decay none "
      "--max-batches 3 --workers 0 --threads 1 --seed 5 --batch-size 4 --nproc 2 --compress " +
      (tmp / "agp.yaml").string();
  const auto whole = tmp / "whole", parts = tmp / "parts";
  const auto r1 = test::run_app(common + " --epochs 3 --out " + whole.string());
  ASSERT_EQ(r1.code, 0) << r1.output;
  const auto r2 = test::run_app(common + " --epochs 1 --out " + parts.string());
  ASSERT_EQ(r2.code, 0) << r2.output;
  const auto r3 =
      test::run_app(common + " --epochs 3 --resume " + (parts / "checkpoint.ckpt").string());
  ASSERT_EQ(r3.code, 0) << r3.output;

  const auto a = state_of(whole / "checkpoint.ckpt"), b = state_of(parts / "checkpoint.ckpt");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_LT((t - b.at(name)).abs().max().item<double>(), 1e-6) << name;
  }
  const auto& w = b.at("mid_part.1.weight");
  EXPECT_GT((w == 0).sum().item<double>() / static_cast<double>(w.numel()), 0.4);
  expect_same_metrics(read_file(whole / "metrics.csv"), read_file(parts / "metrics.csv"));
  EXPECT_EQ(count(read_file(parts / "metrics.csv"), "\n"), 4u);
  EXPECT_EQ(count(read_file(parts / "train.log"), "data-parallel over 2 processes"), 2u);
}

TEST(DistributedTraining, AKilledRankEndsTheJobWithAClearErrorBeforeTheTimeout) {
  test::TempDir tmp;
  const auto log = tmp / "job.log";
  const pid_t launcher = start_process({std::string(IGB_BIN_DIR) + "/igb-train",
                                        "--optform=sr",
                                        "--data",
                                        "synthetic",
                                        "--model",
                                        "fsrcnn",
                                        "--epochs",
                                        "1000",
                                        "--batch-size",
                                        "4",
                                        "--threads",
                                        "1",
                                        "--workers",
                                        "0",
                                        "--log-every",
                                        "5",
                                        "--nproc",
                                        "2",
                                        "--dist-timeout",
                                        "60",
                                        "--out",
                                        (tmp / "run").string()},
                                       log);
  // Wait until rank 0 trains, then kill rank 1.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (read_file(log).find("batch 5/") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t rank1 = rank_process(launcher, 1);
  ASSERT_GT(rank1, 0) << read_file(log);
  ASSERT_EQ(::kill(rank1, SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  std::optional<int> code;
  while (!(code = poll_process(launcher)) &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(90))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!code) {
    ::kill(launcher, SIGKILL);
    FAIL() << "the job still runs 90 s after its rank 1 was killed";
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_LT(seconds, 30) << "well under the 60 s --dist-timeout";
  EXPECT_EQ(*code, 1);
  const auto text = read_file(log);
  EXPECT_NE(text.find("igb-train: error: distributed training: rank 0 of 2: "), std::string::npos)
      << text;
  EXPECT_NE(text.find("igb-train: error: rank 1 of 2 was ended by signal 9; the job stopped"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(".cc:"), std::string::npos) << text;
}

}  // namespace igb::models
