// End-to-end checks that a failed run damages nothing: every check on options, data, model and
// first batch runs before the run directory is touched; config.yaml reruns its run; the metrics
// row of an epoch follows its checkpoint; and each bad option is exit 2 with one readable line.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/checkpoint_forge.h"
#include "tests/support.h"

namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) out.push_back(line);
  return out;
}

struct Result {
  int code = -1;
  std::string out, err;
};

// Every file under `dir` (relative path → bytes); folders appear with an empty value and a '/'.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    files[e.is_directory() ? rel + "/" : rel] = e.is_directory() ? "" : read_file(e.path());
  }
  return files;
}

// A 24-bit BMP of w x h pixels whose colour depends on `seed` (OpenCV reads BMP natively).
std::string bmp(int w, int h, int seed) {
  const int row = (w * 3 + 3) / 4 * 4, size = 54 + row * h;
  std::string b(static_cast<size_t>(size), '\0');
  auto put32 = [&](int at, int v) {
    for (int i = 0; i < 4; ++i)
      b[static_cast<size_t>(at + i)] = static_cast<char>((v >> (8 * i)) & 255);
  };
  b[0] = 'B';
  b[1] = 'M';
  put32(2, size);
  put32(10, 54);
  put32(14, 40);
  put32(18, w);
  put32(22, h);
  b[26] = 1;
  b[28] = 24;
  put32(34, row * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w * 3; ++x)
      b[static_cast<size_t>(54 + y * row + x)] =
          static_cast<char>((x * 37 + y * 11 + seed * 71) % 256);
  return b;
}

class RunDirSafety : public ::testing::Test {
 protected:
  // Runs `args` (an executable of the build and its arguments), capturing stdout and stderr apart.
  Result run(const std::string& args) {
    const fs::path out = dir_ / ".stdout", err = dir_ / ".stderr";
    const std::string cmd = as_user_ + std::string(IGB_BIN_DIR) + "/" + args + " >" + out.string() +
                            " 2>" + err.string();
    Result r;
    const int status = std::system(cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    fs::remove(out);
    fs::remove(err);
    return r;
  }

  // Exit 2 and exactly one line on stderr, "<program>: error: ..." holding `needle`.
  void expect_one_line_error(const std::string& args, const std::string& needle) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    const auto lines = split_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.err;
    EXPECT_NE(lines[0].find(": error: "), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find(needle), std::string::npos)
        << "expected '" << needle << "' in: " << lines[0];
    EXPECT_LT(lines[0].size(), 300u) << lines[0];
  }

  // An SR run on the synthetic images unless `extra` names its --data.
  std::string sr_train(const fs::path& out, const std::string& extra) {
    const bool data = extra.find("--data ") != std::string::npos;
    return "igb-train --optform=sr " + std::string(data ? "" : "--data synthetic ") +
           "--threads 1 --workers 0 --out " + out.string() + " " + extra;
  }

  // A one-epoch FSRCNN run small enough to take a second.
  static constexpr const char* kTiny =
      "--epochs 1 --max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1";

  // A classify image folder (train/ and val/, classes a and b) of 8x8 BMPs; `bad` adds a
  // truncated PNG to the training split.
  fs::path image_folder(const std::string& name, bool bad) {
    const fs::path root = dir_ / name;
    int seed = 0;
    for (const char* split : {"train", "val"})
      for (const char* cls : {"a", "b"}) {
        fs::create_directories(root / split / cls);
        for (int i = 0; i < 3; ++i)
          std::ofstream(root / split / cls / ("img" + std::to_string(i) + ".bmp"), std::ios::binary)
              << bmp(8, 8, seed++);
      }
    if (bad)  // the PNG signature and the start of its IHDR chunk, then nothing
      std::ofstream(root / "train" / "a" / "cut.png", std::ios::binary)
          << std::string("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0", 18);
    return root;
  }

  igb::test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
  // A prefix that runs the executables as another user (for root, who may write anywhere).
  std::string as_user_;
};

// The failures that used to surface only once the run directory had been opened: each one is now
// found first, and the existing run directory keeps every byte.
TEST_F(RunDirSafety, FailingRunsLeaveAnExistingRunDirectoryByteIdentical) {
  const fs::path run_dir = dir_ / "run";
  const Result first = run(sr_train(run_dir, kTiny));
  ASSERT_EQ(first.code, 0) << first.err;
  const auto before = snapshot(run_dir);
  ASSERT_TRUE(before.count("config.yaml") && before.count("train.log") &&
              before.count("metrics.csv"));
  const fs::path images = image_folder("images", /*bad=*/true);

  // A fresh run there is refused for holding a run; with --overwrite, for what is wrong with it,
  // before anything of the old run is replaced.
  expect_one_line_error(sr_train(run_dir, "--epochs 1"),
                        "--out " + run_dir.string() + " holds a run (checkpoint.ckpt)");
  expect_one_line_error(sr_train(run_dir, "--overwrite --epochs 1 --patch-size 600"),
                        "--patch-size 600 is larger than the 144x144 synthetic training images");
  expect_one_line_error(sr_train(run_dir, "--overwrite --epochs 1 --batch-size 65536"),
                        "the training set has 1600 examples, fewer than one batch of 65536");
  expect_one_line_error(
      "igb-train --optform=classify --threads 1 --workers 0 --epochs 1 "
      "--model simplenet_cifar --batch-size 7 --overwrite --data " +
          images.string() + " --out " + run_dir.string(),
      "cut.png");
  expect_one_line_error(sr_train(run_dir, "--epochs 3 --model-arg d=16 --resume " +
                                              (run_dir / "checkpoint.ckpt").string()),
                        "--model-arg d=16 differs from " + (run_dir / "checkpoint.ckpt").string() +
                            ", whose model has d=8");
  expect_one_line_error(
      sr_train(run_dir, "--epochs 1 --resume " + (run_dir / "checkpoint.ckpt").string()),
      "has already trained 1 epochs");
  expect_one_line_error(sr_train(run_dir, "--overwrite --lr nan"), "--lr must be > 0, not nan");
  EXPECT_EQ(snapshot(run_dir), before);

  // The same --model-arg as the checkpoint's is no difference: the resumed run goes on.
  const Result resumed =
      run(sr_train(run_dir, "--epochs 2 --max-batches 2 --batch-size 4 --model-arg d=8 --resume " +
                                (run_dir / "checkpoint.ckpt").string()));
  EXPECT_EQ(resumed.code, 0) << resumed.err;
}

TEST_F(RunDirSafety, FailingRunIntoANewDirectoryLeavesNone) {
  const fs::path fresh = dir_ / "fresh" / "run";
  const fs::path images = image_folder("images", /*bad=*/true);
  expect_one_line_error(sr_train(fresh, "--epochs 1 --patch-size 300"), "--patch-size 300");
  expect_one_line_error(sr_train(fresh, "--epochs 1 --batch-size 2000"),
                        "fewer than one batch of 2000");
  expect_one_line_error(
      "igb-train --optform=classify --threads 1 --workers 0 --epochs 1 "
      "--model simplenet_cifar --batch-size 7 --data " +
          images.string() + " --out " + fresh.string(),
      "cut.png");
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
  // Without the bad image the same folder trains, so it was the image that stopped the run.
  fs::remove(images / "train" / "a" / "cut.png");
  const Result ok =
      run("igb-train --optform=classify --threads 1 --workers 0 --epochs 1 --model simplenet_cifar "
          "--batch-size 6 --data " +
          images.string() + " --out " + fresh.string());
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(fresh / "checkpoint.ckpt"));
}

// A default run's config.yaml (with `model-arg: []`) reruns the same run.
TEST_F(RunDirSafety, ConfigYamlRepeatsTheRun) {
  const Result a = run(sr_train(dir_ / "a", "--epochs 1 --max-batches 2 --batch-size 4"));
  ASSERT_EQ(a.code, 0) << a.err;
  const std::string config = read_file(dir_ / "a" / "config.yaml");
  EXPECT_NE(config.find("model-arg: []"), std::string::npos) << config;
  const Result b = run("igb-train --optform=sr --config " + (dir_ / "a" / "config.yaml").string() +
                       " --out " + (dir_ / "b").string());
  ASSERT_EQ(b.code, 0) << b.err;
  // The same rows but for the time column.
  auto rows = [](const fs::path& csv) {
    std::vector<std::string> out;
    for (auto line : split_lines(read_file(csv))) out.push_back(line.substr(0, line.rfind(',')));
    return out;
  };
  const auto ra = rows(dir_ / "a" / "metrics.csv"), rb = rows(dir_ / "b" / "metrics.csv");
  ASSERT_EQ(ra.size(), 2u);
  EXPECT_EQ(ra, rb);
  const auto sa = nlohmann::json::parse(read_file(dir_ / "a" / "summary.json"));
  const auto sb = nlohmann::json::parse(read_file(dir_ / "b" / "summary.json"));
  EXPECT_EQ(sa["psnr"], sb["psnr"]);
  EXPECT_EQ(sa["params"], 12809);
  EXPECT_EQ(sb["params"], 12809);
}

// The metrics row of an epoch is written after its checkpoint: when the row cannot be written,
// the epoch's checkpoint is already there, and resuming from it writes that epoch's row (from the
// checkpoint) and then the next one's, each once.
TEST_F(RunDirSafety, MetricsRowFollowsItsCheckpoint) {
  const fs::path run_dir = dir_ / "run";
  fs::create_directories(run_dir / "metrics.csv");  // a folder: the row cannot be written
  const Result r = run(sr_train(run_dir, kTiny));
  EXPECT_NE(r.code, 0);
  ASSERT_TRUE(fs::exists(run_dir / "checkpoint.ckpt")) << r.err;
  fs::remove(run_dir / "metrics.csv");
  const Result resumed =
      run(sr_train(run_dir, "--epochs 2 --max-batches 2 --batch-size 4 --resume " +
                                (run_dir / "checkpoint.ckpt").string()));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const auto lines = split_lines(read_file(run_dir / "metrics.csv"));
  ASSERT_EQ(lines.size(), 3u) << read_file(run_dir / "metrics.csv");
  EXPECT_EQ(lines[1].substr(0, 2), "0,");
  EXPECT_EQ(lines[2].substr(0, 2), "1,");
}

// A run stopped right after its first epoch's checkpoint (SIGKILL between checkpoint.ckpt and the
// rest) resumes with that epoch's metrics row and its best.ckpt written once, as if uninterrupted.
TEST_F(RunDirSafety, ResumeWritesTheRowAndBestOfAnEpochStoppedAfterItsCheckpoint) {
  const fs::path a = dir_ / "a", b = dir_ / "b";
  ASSERT_EQ(run(sr_train(a, "--epochs 2 --max-batches 2 --batch-size 4")).code, 0);
  ASSERT_EQ(run(sr_train(b, "--epochs 1 --max-batches 2 --batch-size 4")).code, 0);
  fs::remove(b / "metrics.csv");
  fs::remove(b / "best.ckpt");
  const Result resumed = run(sr_train(
      b, "--epochs 2 --max-batches 2 --batch-size 4 --resume " + (b / "checkpoint.ckpt").string()));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("metrics.csv had no row for epoch 0"), std::string::npos)
      << resumed.err;
  // The same rows as the uninterrupted run but for the time column.
  auto rows = [](const fs::path& csv) {
    std::vector<std::string> out;
    for (auto line : split_lines(read_file(csv))) out.push_back(line.substr(0, line.rfind(',')));
    return out;
  };
  EXPECT_EQ(rows(b / "metrics.csv"), rows(a / "metrics.csv"));
  EXPECT_TRUE(fs::exists(b / "best.ckpt"));
}

// A fresh run never replaces a run: its folder is refused in one line (and stays as it was)
// unless --overwrite says so, and then the new run's files start afresh.
TEST_F(RunDirSafety, AFreshRunNeverReplacesARunUnasked) {
  const fs::path run_dir = dir_ / "run";
  ASSERT_EQ(run(sr_train(run_dir, kTiny)).code, 0);
  const auto before = snapshot(run_dir);
  expect_one_line_error(sr_train(run_dir, kTiny),
                        "--out " + run_dir.string() +
                            " holds a run (checkpoint.ckpt); continue it with --resume, "
                            "choose another --out, or give --overwrite to replace it");
  EXPECT_EQ(snapshot(run_dir), before);
  const Result again = run(sr_train(run_dir, std::string(kTiny) + " --overwrite"));
  ASSERT_EQ(again.code, 0) << again.err;
  const auto lines = split_lines(read_file(run_dir / "metrics.csv"));
  EXPECT_EQ(lines.size(), 2u) << read_file(run_dir / "metrics.csv");
  // --overwrite is said for one command: the run's config.yaml does not carry it.
  EXPECT_EQ(read_file(run_dir / "config.yaml").find("overwrite"), std::string::npos);
}

// A bad value in a --config file is named with its file and line, as a bad key is.
TEST_F(RunDirSafety, ConfigFileValuesAreNamedWithTheirLine) {
  const fs::path cfg = dir_ / "c.yaml";
  const std::string train = "igb-train --optform=sr --data synthetic --threads 1 --out " +
                            (dir_ / "run").string() + " --config " + cfg.string();
  std::ofstream(cfg) << "batch-size: 4\nepochs: [1]\n";
  expect_one_line_error(train, cfg.string() +
                                   ":2: option 'epochs' has the wrong type of value: "
                                   "expected a single value, got a list");
  std::ofstream(cfg, std::ios::trunc) << "resume: [a]\n";
  expect_one_line_error(train, cfg.string() + ":1: option 'resume' has the wrong type of value");
  std::ofstream(cfg, std::ios::trunc) << "batch-size: 4\nepochs: abc\n";
  expect_one_line_error(train, cfg.string() +
                                   ":2: --epochs must be an integer from 1 to 1000000, "
                                   "not abc");
  // The command line overrides the file's value, and then that value is not the file's.
  expect_one_line_error(train + " --epochs 0",
                        "--epochs must be an integer from 1 to 1000000, not 0");
  // A file that sets nothing is refused, not run with every default.
  for (const std::string text : {"", "# nothing yet\n", "{}\n", "optform: sr\n"}) {
    std::ofstream(cfg, std::ios::trunc) << text;
    expect_one_line_error(train, cfg.string() + ": no settings in " + cfg.string());
  }
  EXPECT_FALSE(fs::exists(dir_ / "run"));
}

// A forged checkpoint (a tensor record emptied, its checksum recomputed) is one line naming the
// file and the record in every program that opens it, never a crash.
TEST_F(RunDirSafety, AForgedCheckpointIsOneLineInEveryProgram) {
  const fs::path run_dir = dir_ / "run";
  ASSERT_EQ(run(sr_train(run_dir, kTiny)).code, 0);
  const fs::path forged = dir_ / "forged.ckpt";
  std::string victim;
  igb::test::forge_checkpoint(
      run_dir / "checkpoint.ckpt", forged, [&](const std::string& name, std::string& bytes, bool&) {
        if (victim.empty() && name.rfind("data/", 0) == 0 && bytes.size() > 100) {
          victim = name;
          bytes.clear();
        }
      });
  ASSERT_FALSE(victim.empty());
  const std::string needle = forged.string() + " is corrupt: record " + victim + " holds 0 bytes";
  expect_one_line_error("igb-tools sparsity --checkpoint " + forged.string(), needle);
  expect_one_line_error("igb-test --optform=sr --threads 1 --checkpoint " + forged.string() +
                            " --out " + (dir_ / "t").string(),
                        needle);
  expect_one_line_error(sr_train(dir_ / "resumed", "--epochs 2 --resume " + forged.string()),
                        needle);
}

// Output folders that cannot be made are one line and exit 2 in every program.
TEST_F(RunDirSafety, OutputFoldersThatCannotBeMadeAreOneLine) {
  const fs::path deep = dir_ / std::string(300, 'x') / "out";  // a name over 255 bytes
  const Result made = run(sr_train(dir_ / "run", kTiny));
  ASSERT_EQ(made.code, 0) << made.err;
  std::ofstream(dir_ / "plan.yaml")
      << "runs:\n  - {name: a, optform: sr, data: synthetic, epochs: 1}\n";
  const std::string ckpt = (dir_ / "run" / "best.ckpt").string();
  for (const std::string& args :
       {"igb-test --optform=sr --threads 1 --checkpoint " + ckpt + " --out " + deep.string(),
        "igb-tools sensitivity --threads 1 --eval-batches 1 --levels 0,0.5 --checkpoint " + ckpt +
            " --out " + deep.string(),
        "igb-bench --plan " + (dir_ / "plan.yaml").string() + " --out " + deep.string()}) {
    // (the message holds the 300-character name, so no line-length check here)
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    const auto lines = split_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.err;
    EXPECT_NE(lines[0].find("File name too long"), std::string::npos) << lines[0];
  }
}

// Tools refuse poison before the work: a sweep of too many levels, a metric the evaluation does
// not have (at the first evaluation, not after the sweep), a sensitivity table with a NaN row, a
// budget nothing fits in (no empty schedule written).
TEST_F(RunDirSafety, ToolsRefusePoisonBeforeTheirWork) {
  ASSERT_EQ(run(sr_train(dir_ / "run", kTiny)).code, 0);
  const std::string sweep = "igb-tools sensitivity --threads 1 --eval-batches 1 --checkpoint " +
                            (dir_ / "run" / "best.ckpt").string() + " --out " +
                            (dir_ / "sens").string();
  expect_one_line_error(sweep + " --levels 0:0.9:0.000001",
                        "levels '0:0.9:0.000001' gives 900001 levels; at most 1000");
  expect_one_line_error(sweep + " --levels 0,0.5 --metric psrn",
                        "--metric psrn is not one of the evaluation's: psnr, ssim, loss");
  EXPECT_FALSE(fs::exists(dir_ / "sens" / "sensitivity.csv"));
  const fs::path csv = dir_ / "s.csv";
  std::ofstream(csv) << "parameter,sparsity,psnr\nw,0,30\nw,0.5,nan\n";
  const std::string suggest = "igb-tools suggest-schedule --sensitivity " + csv.string() +
                              " --max-drop 0.5 --epochs 0:10 --out " + (dir_ / "s.yaml").string();
  expect_one_line_error(suggest, csv.string() + ":3: psnr is nan, not a finite number");
  std::ofstream(csv, std::ios::trunc) << "parameter,sparsity,psnr\nw,0,30\nw,1.5,29\n";
  expect_one_line_error(suggest, csv.string() + ":3: sparsity 1.5 is outside [0, 1)");
  std::ofstream(csv, std::ios::trunc) << "parameter,sparsity,psnr\nw,0,30\nw,0.5,20\n";
  expect_one_line_error(suggest, "no parameter stays within --max-drop 0.5 psnr");
  expect_one_line_error("igb-tools suggest-schedule --sensitivity " + csv.string() +
                            " --max-drop 20 --epochs 0:2000000 --out " + (dir_ / "s.yaml").string(),
                        "a run has at most 1000000 epochs");
  EXPECT_FALSE(fs::exists(dir_ / "s.yaml"));
}

// A data-parallel job whose input is bad says so once, from its launcher, not once per rank.
TEST_F(RunDirSafety, ADataParallelJobReportsBadInputOnce) {
  expect_one_line_error(
      sr_train(dir_ / "run", "--nproc 2 --epochs 1 --data " + (dir_ / "none").string()),
      (dir_ / "none").string());
  EXPECT_FALSE(fs::exists(dir_ / "run"));
  // A rank that cannot reach its job says so in one line of ours: c10d's own glog lines
  // ("Logging before InitGoogleLogging()", the socket's timeout) stay off the screen.
  as_user_ =
      "env WORLD_SIZE=2 RANK=1 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 "
      "MASTER_PORT=29633 ";
  const Result lone = run(sr_train(dir_ / "rank", std::string(kTiny) + " --dist-timeout 2"));
  as_user_.clear();
  EXPECT_EQ(lone.code, 1) << lone.err;  // not bad input: the job is not there
  const auto lines = split_lines(lone.err);
  ASSERT_EQ(lines.size(), 1u) << lone.err;
  EXPECT_NE(lines[0].find("could not join the job at 127.0.0.1:29633 within 2 s"),
            std::string::npos)
      << lines[0];
}

TEST_F(RunDirSafety, OutputPathsOfTheWrongKind) {
  std::ofstream(dir_ / "file") << "x";
  fs::create_directories(dir_ / "folder");
  const std::string file = (dir_ / "file").string(), folder = (dir_ / "folder").string();
  expect_one_line_error(sr_train(file, kTiny), "--out " + file + " is a file, not a folder");
  expect_one_line_error(sr_train(dir_ / "file" / "run", kTiny),
                        "--out " + file + "/run: " + file + " is a file, not a folder");
  expect_one_line_error("igb-test --optform=sr --checkpoint x.ckpt --out " + file,
                        "--out " + file + " is a file, not a folder");
  expect_one_line_error("igb-test --optform=sr --checkpoint x.ckpt --save-images " + file,
                        "--save-images " + file + " is a file, not a folder");
  expect_one_line_error("igb-tools macs --model srcnn --csv " + folder,
                        "--csv " + folder + " is a folder, not a file");
  expect_one_line_error("igb-tools macs --model srcnn --json " + file + "/m.json",
                        "--json " + file + "/m.json: " + file + " is a file, not a folder");
  expect_one_line_error("igb-tools profile --model srcnn --repeats 1 --trace " + folder,
                        "--trace " + folder + " is a folder, not a file");
  expect_one_line_error("igb-tools draw --model srcnn --out " + folder,
                        "--out " + folder + " is a folder, not a file");
  EXPECT_EQ(read_file(dir_ / "file"), "x");
  EXPECT_TRUE(fs::is_empty(dir_ / "folder"));
}

TEST_F(RunDirSafety, UnwritableOutputPlaces) {
  if (::geteuid() == 0) {
    // Root may write anywhere: run the executables as nobody, who may enter this folder.
    if (std::system("setpriv --version >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "running as root without setpriv";
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    as_user_ = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const fs::path locked = dir_ / "locked";
  fs::create_directories(locked);
  ::chmod(locked.c_str(), 0555);
  const std::string where = "the folder " + locked.string() + " is not writable";
  expect_one_line_error(sr_train(locked / "run", kTiny), where);
  expect_one_line_error("igb-tools macs --model srcnn --csv " + (locked / "m.csv").string(), where);
  ::chmod(locked.c_str(), 0755);
  EXPECT_TRUE(fs::is_empty(locked));
}

TEST_F(RunDirSafety, NumberOptionsSayTheirLimits) {
  const fs::path out = dir_ / "run";
  expect_one_line_error(sr_train(out, "--lr nan"), "--lr must be > 0, not nan");
  expect_one_line_error(sr_train(out, "--lr -1"), "--lr must be > 0, not -1");
  expect_one_line_error(sr_train(out, "--lr inf"), "--lr must be > 0, not inf");
  expect_one_line_error(sr_train(out, "--weight-decay -1"), "--weight-decay must be >= 0, not -1");
  expect_one_line_error(sr_train(out, "--momentum 2"), "--momentum must be between 0 and 1, not 2");
  expect_one_line_error(sr_train(out, "--max-batches -1"),
                        "--max-batches must be an integer >= 0, not -1");
  expect_one_line_error(sr_train(out, "--epochs 0"),
                        "--epochs must be an integer from 1 to 1000000, not 0");
  expect_one_line_error(sr_train(out, "--batch-size 2.5"),
                        "--batch-size must be an integer from 1 to 65536, not 2.5");
  expect_one_line_error(sr_train(out, "--seed -1"), "--seed must be an integer >= 0, not -1");
  expect_one_line_error("igb-train --optform=sr --threads -1",
                        "--threads must be an integer from 0 to 1024, not -1");
  expect_one_line_error("igb-test --optform=sr --checkpoint x.ckpt --threads -1",
                        "--threads must be an integer from 0 to 1024, not -1");
  expect_one_line_error("igb-tools macs --model srcnn --threads -1",
                        "--threads must be an integer from 0 to 1024, not -1");
  expect_one_line_error("igb-test --optform=sr --checkpoint x.ckpt --seed -1", "--seed");
  expect_one_line_error("igb-tools macs --model srcnn --seed -1", "--seed");
  expect_one_line_error("igb-tools profile --model srcnn --top 0",
                        "--top must be an integer from 1 to 1000, not 0");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(RunDirSafety, ToolsNameTheUnknownCommandAndRefuseHugeInputs) {
  expect_one_line_error("igb-tools frobnicate",
                        "unknown command 'frobnicate'; valid commands: draw, early-exit, "
                        "export-onnx, export-torchscript, list, macs, make-cifar, partition, "
                        "profile, run, sensitivity, sparsity, suggest-schedule, summary, thin");
  // 3e12 float32 values: refused before anything is allocated, with the memory it would need.
  expect_one_line_error("igb-tools macs --model srcnn --input 1x1x1000000x3000000",
                        "--input 1x1x1000000x3000000 is too large: the input alone needs "
                        "11175.9 GiB (float32)");
  const Result ok = run("igb-tools macs --model srcnn --input 1x1x64x48");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("1x1x64x48"), std::string::npos) << ok.out;
}

// Training on a disk that fills up, or under a file-size limit (`prlimit --fsize`): the write
// that fails is one line naming the file and the system's reason, exit 2, no temporary file left,
// and the last checkpoint written before it intact and loadable.
TEST_F(RunDirSafety, AFullDiskStopsTrainingInOneLineAndKeepsTheLastCheckpoint) {
  const std::string tiny =
      "--max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 "
      "--model-arg m=1";
  ASSERT_EQ(run(sr_train(dir_ / "probe", "--epochs 1 " + tiny)).code, 0);
  const auto ckpt_size = fs::file_size(dir_ / "probe" / "checkpoint.ckpt");
  auto temporaries = [](const fs::path& run_dir) {
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(run_dir))
      if (e.path().filename().string().find(".tmp") != std::string::npos)
        found.push_back(e.path().filename().string());
    return found;
  };
  // A file-size limit below the checkpoint's size: the first checkpoint is refused.
  as_user_ = "prlimit --fsize=" + std::to_string(ckpt_size / 2) + " ";
  const fs::path limited = dir_ / "limited";
  Result r = run(sr_train(limited, "--epochs 2 " + tiny));
  as_user_.clear();
  EXPECT_EQ(r.code, 2) << r.err;
  // The training log goes to stderr too; the error is its one line with "error:", the last.
  auto errors = [](const std::string& err) {
    std::vector<std::string> found;
    for (const auto& line : split_lines(err))
      if (line.find(": error: ") != std::string::npos) found.push_back(line);
    EXPECT_EQ(split_lines(err).back(), found.empty() ? "" : found.back());
    return found;
  };
  auto lines = errors(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(
      lines[0].find("cannot write " + (limited / "checkpoint.ckpt").string() + ": File too large"),
      std::string::npos)
      << lines[0];
  EXPECT_TRUE(temporaries(limited).empty());
  // The log: resumed under a limit just above train.log's size, the run's first line past it is
  // refused whole (the log keeps every byte it had) and stops the run, before any checkpoint.
  const fs::path probe = dir_ / "probe";
  const std::string log = read_file(probe / "train.log");
  const std::string checkpoint = read_file(probe / "checkpoint.ckpt");
  as_user_ = "prlimit --fsize=" + std::to_string(log.size() + 16) + " ";
  r = run(
      sr_train(probe, "--epochs 2 --resume " + (probe / "checkpoint.ckpt").string() + " " + tiny));
  as_user_.clear();
  EXPECT_EQ(r.code, 2) << r.err;
  lines = errors(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("cannot write " + (probe / "train.log").string() + ": File too large"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(read_file(probe / "train.log"), log);
  EXPECT_EQ(read_file(probe / "checkpoint.ckpt"), checkpoint);
  EXPECT_TRUE(temporaries(probe).empty());
  // A disk of room for epoch 0's checkpoint and best.ckpt (and a few pages of logs), not for
  // epoch 1's checkpoint beside them (tmpfs, as root only).
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const fs::path disk = dir_ / "disk";
  fs::create_directories(disk);
  const auto bytes = (2 * ckpt_size + ckpt_size / 2 + 6 * 4096) / 4096 * 4096;
  if (std::system(("mount -t tmpfs -o size=" + std::to_string(bytes) + " igb-test " +
                   disk.string() + " 2>/dev/null")
                      .c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here";
  struct Unmount {
    fs::path at;
    ~Unmount() { (void)std::system(("umount " + at.string()).c_str()); }
  } unmount{disk};
  const fs::path full = disk / "run";
  r = run(sr_train(full, "--epochs 3 " + tiny));
  EXPECT_EQ(r.code, 2) << r.err;
  lines = errors(r.err);
  ASSERT_EQ(lines.size(), 1u) << r.err;
  EXPECT_NE(lines[0].find("cannot write " + full.string() + "/"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(": No space left on device"), std::string::npos) << lines[0];
  EXPECT_TRUE(temporaries(full).empty());
  const Result tested =
      run("igb-test --optform=sr --threads 1 --checkpoint " + (full / "checkpoint.ckpt").string() +
          " --out " + (dir_ / "tested").string());
  EXPECT_EQ(tested.code, 0) << tested.err;
}

// The tools' writers under a file-size limit: one line naming the file asked for (not its
// temporary) and the reason, exit 2, no temporary left, an earlier file of that name intact.
TEST_F(RunDirSafety, ToolsWritingPastAFileSizeLimitSayWhyInOneLine) {
  const fs::path onnx = dir_ / "r20.onnx", png = dir_ / "r20.png";
  std::ofstream(onnx) << "earlier";
  std::ofstream(png) << "earlier";
  as_user_ = "prlimit --fsize=4096 ";
  for (const auto& [args, file] : std::vector<std::pair<std::string, fs::path>>{
           {"igb-tools export-onnx --model resnet20_cifar --threads 1 --out " + onnx.string(),
            onnx},
           {"igb-tools draw --model resnet20_cifar --out " + png.string(), png}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    const auto lines = split_lines(r.err);
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.err;
    EXPECT_NE(lines[0].find("cannot write " + file.string() + ": File too large"),
              std::string::npos)
        << lines[0];
    EXPECT_EQ(read_file(file), "earlier");
  }
  as_user_.clear();
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// early-exit --export and igb-bench's run directories under a file-size limit: the segment that
// does not fit is named (not a part file), the segments exported before are kept; a bench's run
// whose checkpoint is refused fails alone with igb-train's one line, and nothing temporary stays.
TEST_F(RunDirSafety, SegmentsAndBenchRunsPastAFileSizeLimitSayWhyInOneLine) {
  ASSERT_EQ(run("igb-train --optform=classify --model resnet20_cifar_earlyexit "
                "--earlyexit_lossweights 0.3 --earlyexit_thresholds 0.9 --data synthetic "
                "--threads 1 --workers 0 --epochs 1 --max-batches 1 --batch-size 4 --out " +
                (dir_ / "ee").string())
                .code,
            0);
  const fs::path segments = dir_ / "segments";
  const std::string export_segments =
      "igb-tools early-exit --checkpoint " + (dir_ / "ee" / "best.ckpt").string() +
      " --data synthetic --max-samples 32 --batch-size 32 --repeats 1 --threads 1 --export " +
      segments.string();
  ASSERT_EQ(run(export_segments).code, 0);
  const std::string segment0 = read_file(segments / "segment0.onnx");
  const std::string manifest = read_file(segments / "manifest.json");
  as_user_ = "prlimit --fsize=" + std::to_string(segment0.size() / 2) + " ";
  Result r = run(export_segments);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(split_lines(r.err).back(), "igb-tools: error: cannot write " +
                                           (segments / "segment0.onnx").string() +
                                           ": File too large");
  EXPECT_EQ(read_file(segments / "segment0.onnx"), segment0);
  EXPECT_EQ(read_file(segments / "manifest.json"), manifest);

  std::ofstream(dir_ / "plan.yaml") << "defaults:\n  optform: sr\n  data: synthetic\n"
                                       "  epochs: 1\n  options: {max-batches: 2, threads: 1, "
                                       "batch-size: 4}\nlatency: {batch_size: 1, repeats: 1}\n"
                                       "runs:\n  - {name: fsrcnn, model: fsrcnn}\n";
  as_user_ = "prlimit --fsize=8192 ";
  r = run("igb-bench --threads 1 --plan " + (dir_ / "plan.yaml").string() + " --out " +
          (dir_ / "bench").string());
  as_user_.clear();
  EXPECT_EQ(r.code, 1) << r.err;  // its one run failed
  const std::string refused = "igb-train: error: cannot write " +
                              (dir_ / "bench" / "fsrcnn" / "checkpoint.ckpt").string() +
                              ": File too large";
  EXPECT_NE(r.out.find("failed: " + refused), std::string::npos) << r.out;
  const auto bench = nlohmann::json::parse(read_file(dir_ / "bench" / "bench.json"));
  EXPECT_EQ(bench["runs"][0]["error"], refused);
  for (const auto& e : fs::recursive_directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// partition checks every input before it measures a cost: a bad --frames-from, a value of
// --objective or --transfer it does not know (named with its flag), or memory limits nothing fits
// is the only line.
TEST_F(RunDirSafety, PartitionRefusesBadInputsBeforeMeasuring) {
  const std::string devices = std::string(IGB_SOURCE_DIR) + "/bench/serve_chain_devices.yaml";
  const std::string partition =
      "igb-tools partition --model resnet20_cifar --threads 1 --devices " + devices;
  fs::create_directories(dir_ / "empty");
  expect_one_line_error(partition + " --frames-from " + (dir_ / "none.avi").string(),
                        "none.avi does not exist");
  expect_one_line_error(partition + " --frames-from " + (dir_ / "empty").string(),
                        "gives fewer than 2 frames");
  expect_one_line_error(partition + " --frames-from " + devices, "cannot be opened as a video");
  expect_one_line_error(partition + " --objective fastest", "--objective: fastest not in");
  expect_one_line_error(partition + " --transfer int4", "--transfer: int4 not in");
  // Devices whose memory holds no assignment of the model: refused before any cost is measured.
  std::ofstream(dir_ / "tiny.yaml") << "devices:\n  - {name: a, memory_mb: 0.3}\n"
                                       "  - {name: b, memory_mb: 0.3}\nlinks:\n"
                                       "  - {bandwidth_mb_s: 2.5}\n";
  expect_one_line_error("igb-tools partition --model resnet20_cifar --threads 1 --devices " +
                            (dir_ / "tiny.yaml").string(),
                        "resnet20_cifar (1.08 MB of parameters) fits no assignment to the chain");
}

// sensitivity refuses options that cannot make a sweep before it loads and evaluates the model:
// the refusal is the only line (no status line before it).
TEST_F(RunDirSafety, SensitivityRefusesImpossibleOptionsBeforeEvaluating) {
  ASSERT_EQ(run(sr_train(dir_ / "run", kTiny)).code, 0);
  expect_one_line_error("igb-tools sensitivity --threads 1 --checkpoint " +
                            (dir_ / "run" / "best.ckpt").string() +
                            " --with-dependencies --mode element --out " + (dir_ / "s").string(),
                        "--with-dependencies applies to --mode filter only");
  EXPECT_FALSE(fs::exists(dir_ / "s"));
}

// More writers past a file-size limit: igb-test's --save-images and partition's --out (its plan,
// chart and cost cache). Whichever file is refused first, it is one line naming it with the
// reason, exit 2, and no temporary is left in either folder.
TEST_F(RunDirSafety, SavedImagesAndPlansPastAFileSizeLimitSayWhyInOneLine) {
  ASSERT_EQ(run(sr_train(dir_ / "run", kTiny)).code, 0);
  const std::string devices = std::string(IGB_SOURCE_DIR) + "/bench/serve_chain_devices.yaml";
  as_user_ = "prlimit --fsize=2048 ";
  for (const auto& [args, folder] : std::vector<std::pair<std::string, fs::path>>{
           {"igb-test --optform=sr --threads 1 --checkpoint " +
                (dir_ / "run" / "best.ckpt").string() + " --save-images " +
                (dir_ / "images").string() + " --out " + (dir_ / "tested").string(),
            dir_ / "images"},
           {"igb-tools partition --model resnet20_cifar --threads 1 --devices " + devices +
                " --cache-dir " + (dir_ / "plan" / "cache").string() + " --out " +
                (dir_ / "plan").string(),
            dir_ / "plan"}}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    const auto lines = split_lines(r.err);
    ASSERT_FALSE(lines.empty()) << args;
    EXPECT_NE(lines.back().find(": error: cannot write " + folder.string() + "/"),
              std::string::npos)
        << lines.back();
    EXPECT_NE(lines.back().find(": File too large"), std::string::npos) << lines.back();
    for (const auto& e : fs::recursive_directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  as_user_.clear();
}

}  // namespace
