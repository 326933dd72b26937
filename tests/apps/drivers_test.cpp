// End-to-end checks of the three executables: bad input gives one clear line and exit 2, leaving
// nothing behind; a short run writes the whole run directory and igb-test reads it back.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace {

namespace fs = std::filesystem;

using Result = igb::test::RunResult;

Result run(const std::string& args) { return igb::test::run_app(args); }

/// A tiny CIFAR-10 folder in the binary format under `dir`: 40 training and 20 test records.
void write_tiny_cifar(const fs::path& dir) {
  fs::create_directories(dir);
  auto records = [](int n, int offset) {
    std::string out;
    for (int i = 0; i < n; ++i) {
      out.push_back(static_cast<char>((i + offset) % 10));
      for (int p = 0; p < 3072; ++p)
        out.push_back(static_cast<char>((p * 7 + i * 13 + offset) % 256));
    }
    return out;
  };
  std::ofstream(dir / "data_batch_1.bin", std::ios::binary) << records(40, 0);
  std::ofstream(dir / "test_batch.bin", std::ios::binary) << records(20, 5);
}

class Drivers : public ::testing::Test {
 protected:
  // Expects exit 2 with exactly one line that contains `needle`, and no run directory left.
  void expect_input_error(const std::string& args, const std::string& needle) {
    auto r = run(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.output;
    auto lines = r.lines();
    ASSERT_EQ(lines.size(), 1u) << args << "\n" << r.output;
    EXPECT_NE(lines[0].find("error: "), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find(needle), std::string::npos)
        << "expected '" << needle << "' in: " << lines[0];
    EXPECT_FALSE(fs::exists(dir_ / "run")) << "partial run directory left by: " << args;
  }

  // An SR run on the synthetic images unless `extra` names its --data.
  std::string train(const std::string& extra) {
    const bool data = extra.find("--data ") != std::string::npos;
    return "igb-train --optform=sr " + std::string(data ? "" : "--data synthetic ") + "--out " +
           (dir_ / "run").string() + " --threads 1 " + extra;
  }

  // A ResNet-20 trained for one epoch on a tiny CIFAR-10 folder written to dir_/cifar, into
  // dir_/run.
  Result train_tiny_resnet20() {
    write_tiny_cifar(dir_ / "cifar");
    return run(
        "igb-train --optform=classify --model resnet20_cifar --threads 1 --epochs 1 "
        "--batch-size 8 --data " +
        (dir_ / "cifar").string() + " --out " + (dir_ / "run").string());
  }

  igb::test::TempDir tmp_;
  fs::path dir_ = tmp_.path();
};

TEST_F(Drivers, OptformIsRequiredAndValidated) {
  expect_input_error("igb-train --model fsrcnn", "valid optforms: classify, deblur, sr");
  expect_input_error("igb-train --optform=nope",
                     "unknown optform 'nope'; valid optforms: classify, deblur, sr");
  expect_input_error("igb-test --optform nope --checkpoint x",
                     "valid optforms: classify, deblur, sr");
  auto help = run("igb-train --optform=sr --help");
  EXPECT_EQ(help.code, 0);
  for (const char* opt :
       {"--model",     "--data",     "--epochs",       "--batch-size", "--lr",
        "--optimizer", "--momentum", "--weight-decay", "--threads",    "--workers",
        "--seed",      "--device",   "--out",          "--resume",     "--max-batches",
        "--log-every", "--upscale",  "--patch-size",   "--channels",   "--config"})
    EXPECT_NE(help.output.find(opt), std::string::npos) << opt;
}

TEST_F(Drivers, BadOptionValues) {
  expect_input_error(train("--epochs -3"), "--epochs");
  expect_input_error(train("--upscale 5"), "--upscale");
  expect_input_error(train("--model fsrcnnn"),
                     "unknown model 'fsrcnnn'; valid sr models: espcn, fsrcnn, srcnn, vdsr");
  expect_input_error(train("--model resnet20_cifar"),
                     "model 'resnet20_cifar' is a classify model; valid sr models");
  expect_input_error(train("--patch-size 50 --upscale 3"),
                     "--patch-size 50 is not a multiple of --upscale 3");
  expect_input_error(train("--model-arg d"), "--model-arg 'd' is not KEY=VALUE");
  expect_input_error(train("--model-arg q=3"), "model fsrcnn has no option 'q'");
  expect_input_error(train("--no-such-flag"), "--no-such-flag");
}

TEST_F(Drivers, BadDataFolders) {
  expect_input_error(train("--data " + (dir_ / "missing").string()), "does not exist");
  fs::create_directories(dir_ / "empty");
  expect_input_error(train("--data " + (dir_ / "empty").string()), "holds no images");
  fs::create_directories(dir_ / "corrupt/train");
  fs::create_directories(dir_ / "corrupt/val");
  std::ofstream(dir_ / "corrupt/train/a.png") << "not a png";
  std::ofstream(dir_ / "corrupt/val/b.png") << "not a png";
  expect_input_error(train("--data " + (dir_ / "corrupt").string()),
                     "a.png is unreadable or corrupt");
}

TEST_F(Drivers, BadConfigFiles) {
  std::ofstream(dir_ / "bad.yaml") << "epochs: 2\nbatchsize: 4\n";
  expect_input_error(train("--config " + (dir_ / "bad.yaml").string()),
                     "bad.yaml:2: unknown option 'batchsize'; did you mean batch-size");
  std::ofstream(dir_ / "other.yaml") << "optform: classify\n";
  expect_input_error(train("--config " + (dir_ / "other.yaml").string()),
                     "this run is --optform=sr");
  // A number that is not finite, from a file as from the command line (it trained with a NaN
  // learning rate).
  std::ofstream(dir_ / "nan.yaml") << "epochs: 1\nlr: .nan\n";
  expect_input_error(train("--config " + (dir_ / "nan.yaml").string()),
                     "nan.yaml:2: --lr must be > 0, not .nan");
  std::ofstream(dir_ / "inf.yaml") << "momentum: 1e400\n";
  expect_input_error(train("--config " + (dir_ / "inf.yaml").string()),
                     "inf.yaml:1: --momentum must be");
}

// /proc takes no new file, though access() says it is writable (to root everywhere): an output
// there is refused before any work, in one line (the profile ran, then failed to write).
TEST_F(Drivers, OutputsWhereNoFileCanBeMadeAreRefusedBeforeAnyWork) {
  auto r =
      run("igb-tools profile --model resnet20_cifar --batch-sizes 1 --threads 1 --trace "
          "/proc/igb-test/trace.json");
  EXPECT_EQ(r.code, 2) << r.output;
  ASSERT_EQ(r.lines().size(), 1u) << r.output;
  EXPECT_NE(r.output.find("--trace /proc/igb-test/trace.json: the folder /proc is not writable"),
            std::string::npos)
      << r.output;
  r = run("igb-tools early-exit --checkpoint " + (dir_ / "none.ckpt").string() +
          " --export /proc/igb-segments");
  EXPECT_EQ(r.code, 2) << r.output;
  ASSERT_EQ(r.lines().size(), 1u) << r.output;
  EXPECT_NE(r.output.find("--export /proc/igb-segments: the folder /proc is not writable"),
            std::string::npos)
      << r.output;
}

// A zoo model without a checkpoint holds the weights of --seed (0) in every command: run twice
// gives one output (it gave another on every call), export-onnx twice writes one file, and
// another seed gives other weights.
TEST_F(Drivers, AZooModelHoldsTheSameSeededWeightsInEveryCommand) {
  const std::string input = (dir_ / "in.npy").string();
  const auto run_model = [&](const std::string& out, const std::string& extra) {
    auto r =
        run("igb-tools run --model resnet20_cifar --threads 1 --random-input 1x3x32x32 "
            "--input " +
            input + " --output " + (dir_ / out).string() + extra);
    EXPECT_EQ(r.code, 0) << r.output;
    std::ifstream f(dir_ / out, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string a = run_model("a.npy", ""), b = run_model("b.npy", "");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(run_model("c.npy", " --seed 1"), a);
  const auto export_model = [&](const std::string& out) {
    auto r = run("igb-tools export-onnx --model resnet20_cifar --threads 1 --out " +
                 (dir_ / out).string());
    EXPECT_EQ(r.code, 0) << r.output;
    std::ifstream f(dir_ / out, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string x = export_model("x.onnx");
  ASSERT_FALSE(x.empty());
  EXPECT_EQ(export_model("y.onnx"), x);
}

TEST_F(Drivers, CorruptAndTruncatedCheckpoints) {
  std::ofstream(dir_ / "garbage.ckpt") << "garbage";
  expect_input_error("igb-test --optform=sr --checkpoint " + (dir_ / "garbage.ckpt").string(),
                     "is corrupt or truncated");
  expect_input_error(train("--resume " + (dir_ / "garbage.ckpt").string()),
                     "is corrupt or truncated");
  expect_input_error("igb-test --optform=sr --checkpoint " + (dir_ / "none.ckpt").string(),
                     "does not exist");
}

TEST_F(Drivers, ShortRunWritesTheRunDirectoryAndTestReadsItBack) {
  auto r = run(train(
      "--epochs 2 --max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1"));
  ASSERT_EQ(r.code, 0) << r.output;
  fs::path run_dir = dir_ / "run";
  for (const char* f :
       {"train.log", "metrics.csv", "config.yaml", "checkpoint.ckpt", "best.ckpt", "summary.json"})
    EXPECT_TRUE(fs::exists(run_dir / f)) << f;
  bool events = false;
  for (const auto& e : fs::directory_iterator(run_dir))
    events = events || e.path().filename().string().find("tfevents") != std::string::npos;
  EXPECT_TRUE(events);
  auto summary = nlohmann::json::parse(std::ifstream(run_dir / "summary.json"));
  for (const char* k : {"optform", "model", "epochs", "best_epoch", "params", "psnr", "ssim",
                        "best_psnr", "bicubic_psnr", "bicubic_ssim"})
    EXPECT_TRUE(summary.contains(k)) << k;
  EXPECT_EQ(summary["epochs"], 2);
  EXPECT_EQ(summary["params"],
            8 * 25 + 8 + 8 + 8 * 4 + 4 + 4 + 4 * 9 * 4 + 4 + 4 + 4 * 8 + 8 + 8 + 81 * 8 + 1);

  // The resolved options reload with --config and reproduce the run's settings.
  std::ifstream cfg(run_dir / "config.yaml");
  std::string cfg_text((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_NE(cfg_text.find("epochs: 2"), std::string::npos) << cfg_text;
  EXPECT_NE(cfg_text.find("optform: sr"), std::string::npos) << cfg_text;

  // A run stopped after epoch 1's checkpoint but before its metrics.csv row: drop that row.
  std::string metrics;
  {
    std::ifstream m(run_dir / "metrics.csv");
    metrics.assign(std::istreambuf_iterator<char>(m), std::istreambuf_iterator<char>());
  }
  const size_t row1 = metrics.rfind("\n1,");
  ASSERT_NE(row1, std::string::npos) << metrics;
  std::ofstream(run_dir / "metrics.csv", std::ios::trunc) << metrics.substr(0, row1 + 1);

  // Resuming for a third epoch continues the same run directory, first writing the missing row
  // from the checkpoint, as it was.
  auto resumed = run("igb-train --optform=sr --threads 1 --config " +
                     (run_dir / "config.yaml").string() + " --epochs 3 --resume " +
                     (run_dir / "checkpoint.ckpt").string() + " --out " + run_dir.string());
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("metrics.csv had no row for epoch 1"), std::string::npos)
      << resumed.output;
  {
    std::ifstream m(run_dir / "metrics.csv");
    const std::string now((std::istreambuf_iterator<char>(m)), std::istreambuf_iterator<char>());
    EXPECT_EQ(now.substr(0, metrics.size()), metrics);
    EXPECT_EQ(now.find("\n1,", row1 + 1), std::string::npos) << now;
    EXPECT_NE(now.find("\n2,", metrics.size() - 1), std::string::npos) << now;
  }
  EXPECT_NE(resumed.output.find("training fsrcnn for epochs 2-2"), std::string::npos)
      << resumed.output;
  auto again = run("igb-train --optform=sr --threads 1 --epochs 3 --resume " +
                   (run_dir / "checkpoint.ckpt").string());
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.output.find("has already trained 3 epochs"), std::string::npos) << again.output;

  // A truncated copy of a real checkpoint is refused by both drivers, and nothing is written.
  fs::copy_file(run_dir / "checkpoint.ckpt", dir_ / "cut.ckpt");
  fs::resize_file(dir_ / "cut.ckpt", fs::file_size(dir_ / "cut.ckpt") * 2 / 3);
  auto cut = run("igb-test --optform=sr --checkpoint " + (dir_ / "cut.ckpt").string() + " --out " +
                 (dir_ / "cut_out").string());
  EXPECT_EQ(cut.code, 2) << cut.output;
  EXPECT_NE(cut.output.find("cut.ckpt is corrupt or truncated"), std::string::npos) << cut.output;
  EXPECT_FALSE(fs::exists(dir_ / "cut_out"));
  auto cut_resume = run("igb-train --optform=sr --epochs 5 --resume " +
                        (dir_ / "cut.ckpt").string() + " --out " + (dir_ / "cut_run").string());
  EXPECT_EQ(cut_resume.code, 2) << cut_resume.output;
  EXPECT_FALSE(fs::exists(dir_ / "cut_run"));

  auto t =
      run("igb-test --optform=sr --threads 1 --checkpoint " + (run_dir / "best.ckpt").string() +
          " --save-images " + (dir_ / "images").string() + " --out " + (dir_ / "test").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("Bicubic PSNR"), std::string::npos);
  auto ts = nlohmann::json::parse(std::ifstream(dir_ / "test" / "test_summary.json"));
  EXPECT_EQ(ts["images"], 10);
  EXPECT_NEAR(ts["bicubic_psnr"].get<double>(), summary["bicubic_psnr"].get<double>(), 1e-9);
  EXPECT_TRUE(fs::exists(dir_ / "images" / "synthetic_0_x3.png"));
}

// --int8: the post-training quantized model in integers beside its fake-quantized form; a float
// model, with nothing to run in integers, is refused in one line.
TEST_F(Drivers, Int8ScoresTheIntegerModelBesideTheFakeQuantizedOne) {
  const auto r = train_tiny_resnet20();
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string test = "igb-test --optform=classify --threads 1 --data " +
                           (dir_ / "cifar").string() + " --checkpoint " +
                           (dir_ / "run" / "best.ckpt").string();
  auto refused = run(test + " --int8 --out " + (dir_ / "f").string());
  EXPECT_EQ(refused.code, 2) << refused.output;
  EXPECT_NE(refused.output.find("no layer runs in integers"), std::string::npos) << refused.output;
  EXPECT_EQ(std::count(refused.output.begin(), refused.output.end(), '\n'), 1) << refused.output;
  auto t = run(test + " --int8 --quantize-eval " + IGB_SOURCE_DIR +
               "/schedules/classify/resnet20_ptq_int8.yaml --calibration-batches 1 --out " +
               (dir_ / "q").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("INT8 execution: 19 of 20 convolution and linear layers in INT8 "
                          "(float: fc)"),
            std::string::npos)
      << t.output;
  auto s = nlohmann::json::parse(std::ifstream(dir_ / "q" / "test_summary.json"));
  const auto& int8 = s["quantize_eval"]["int8"];
  ASSERT_TRUE(int8.is_object()) << s.dump(1);
  // 20 test images: the integer model classifies each as the fake-quantized one does; its loss
  // within 0.1 % (a one-step tie broken the other way passes on through twenty layers of this
  // barely trained model: 0.07 % on AVX2).
  EXPECT_EQ(int8["top1"], s["quantize_eval"]["quantized"]["top1"]);
  const double loss = s["quantize_eval"]["quantized"]["loss"].get<double>();
  EXPECT_NEAR(int8["loss"].get<double>(), loss, 1e-3 * loss);
  // By default both engines were timed and the faster kept; --int8-engine qnnpack asks for
  // LibTorch's QNNPACK kernels (a residual layer rounded twice: within one step, so at most a
  // class or two of 20 may flip).
  EXPECT_NE(t.output.find(", timed faster (oneDNN "), std::string::npos) << t.output;
  auto q = run(test + " --int8 --int8-engine qnnpack --quantize-eval " + IGB_SOURCE_DIR +
               "/schedules/classify/resnet20_ptq_int8.yaml --calibration-batches 1 --out " +
               (dir_ / "qnnpack").string());
  ASSERT_EQ(q.code, 0) << q.output;
  EXPECT_NE(q.output.find("layers in INT8 (float: fc); QNNPACK (as asked)"), std::string::npos)
      << q.output;
  auto sq = nlohmann::json::parse(std::ifstream(dir_ / "qnnpack" / "test_summary.json"));
  EXPECT_NEAR(sq["quantize_eval"]["int8"]["top1"].get<double>(), int8["top1"].get<double>(), 10.0);
}

// Post-training quantization as Distiller's --quantize-eval (apputils/image_classifier.py):
// calibration statistics written, FP32 and quantized metrics side by side, the statistics reused.
TEST_F(Drivers, QuantizeEvalCalibratesAndComparesWithFp32) {
  const auto r = train_tiny_resnet20();
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = (dir_ / "run" / "best.ckpt").string();
  const std::string yaml =
      std::string(IGB_SOURCE_DIR) + "/schedules/classify/resnet20_ptq_int8.yaml";
  const std::string test = "igb-test --optform=classify --threads 1 --data " +
                           (dir_ / "cifar").string() + " --checkpoint " + ckpt;
  auto t = run(test + " --quantize-eval " + yaml + " --calibration-batches 2 --out " +
               (dir_ / "q1").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("PTQ SYMMETRIC"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("calibration pass 2/2 on up to 2 batches"), std::string::npos)
      << t.output;
  EXPECT_NE(t.output.find(" FP32          |"), std::string::npos) << t.output;
  ASSERT_TRUE(fs::exists(dir_ / "q1" / "quant_stats.yaml"));
  auto s1 = nlohmann::json::parse(std::ifstream(dir_ / "q1" / "test_summary.json"));
  const auto& qe = s1["quantize_eval"];
  EXPECT_EQ(qe["fp32"]["top1"], s1["top1"]);
  // The 20 test images are one batch of 128: calibration runs on all of it and says so.
  EXPECT_EQ(qe["calibration_batches"], 1);
  EXPECT_NE(t.output.find("calibration ran on all 1 batches of the evaluation data"),
            std::string::npos)
      << t.output;
  EXPECT_EQ(qe["quantizer"]["per_channel_wts"], true);
  // 19 conv layers (their batch norms folded) and the classifier.
  int folded = 0;
  for (const auto& l : qe["layers"]) folded += l.contains("folded_bn") && !l["folded_bn"].is_null();
  EXPECT_EQ(folded, 19);
  const double q_loss = qe["quantized"]["loss"].get<double>();
  EXPECT_GT(std::abs(q_loss - s1["loss"].get<double>()), 0.0);
  EXPECT_LT(std::abs(q_loss - s1["loss"].get<double>()), 0.1);

  // The written statistics, reused, give the same quantized model.
  auto t2 = run(test + " --quantize-eval " + yaml + " --qe-stats-file " +
                (dir_ / "q1" / "quant_stats.yaml").string() + " --out " + (dir_ / "q2").string());
  ASSERT_EQ(t2.code, 0) << t2.output;
  auto s2 = nlohmann::json::parse(std::ifstream(dir_ / "q2" / "test_summary.json"));
  EXPECT_EQ(s2["quantize_eval"]["quantized"], qe["quantized"]);
  EXPECT_FALSE(fs::exists(dir_ / "q2" / "quant_stats.yaml"));
  // The Distiller-shaped example runs unchanged on the same statistics.
  auto t3 = run(test + " --quantize-eval " + IGB_SOURCE_DIR +
                "/schedules/distiller/resnet20_cifar_post_train.yaml --qe-stats-file " +
                (dir_ / "q1" / "quant_stats.yaml").string() + " --out " + (dir_ / "q5").string());
  ASSERT_EQ(t3.code, 0) << t3.output;
  EXPECT_NE(t3.output.find("PTQ ASYMMETRIC_UNSIGNED"), std::string::npos) << t3.output;
  auto s3 = nlohmann::json::parse(std::ifstream(dir_ / "q5" / "test_summary.json"));
  EXPECT_EQ(s3["quantize_eval"]["quantizer"]["clip_acts"], "AVG");
  EXPECT_EQ(s3["quantize_eval"]["quantizer"]["overrides"][0]["fc"]["clip_acts"], "NONE");

  // A bad key, and a stats file lacking a layer, end with one line and exit 2.
  std::ofstream(dir_ / "bad.yaml") << "quantizers:\n  q:\n    class: PostTrainLinearQuantizer\n"
                                      "    clip_acts: MAX\n";
  auto bad = run(test + " --quantize-eval " + (dir_ / "bad.yaml").string() + " --out " +
                 (dir_ / "q3").string());
  EXPECT_EQ(bad.code, 2);
  ASSERT_EQ(bad.lines().size(), 1u) << bad.output;
  EXPECT_NE(bad.lines()[0].find("bad.yaml:4: quantizers.q.clip_acts 'MAX' is not a clip mode"),
            std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "q3"));
  std::ofstream(dir_ / "stats.yaml") << "conv1:\n  inputs:\n    0: {min: -1, max: 1, avg_min: -1, "
                                        "avg_max: 1, mean: 0}\n";
  auto missing = run(test + " --quantize-eval " + yaml + " --qe-stats-file " +
                     (dir_ / "stats.yaml").string() + " --out " + (dir_ / "q4").string());
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.lines().back().find("stats.yaml has no statistics of layer fc (output)"),
            std::string::npos)
      << missing.output;
}

TEST_F(Drivers, QuantizeEvalOfAnSrModel) {
  auto r = run(train(
      "--epochs 1 --max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto t = run("igb-test --optform=sr --threads 1 --checkpoint " +
               (dir_ / "run" / "best.ckpt").string() + " --quantize-eval " + IGB_SOURCE_DIR +
               "/schedules/sr/fsrcnn_ptq_int8.yaml --calibration-batches 3 --out " +
               (dir_ / "q").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("PTQ a:ASYMMETRIC_UNSIGNED w:SYMMETRIC"), std::string::npos) << t.output;
  auto s = nlohmann::json::parse(std::ifstream(dir_ / "q" / "test_summary.json"));
  const auto& qe = s["quantize_eval"];
  EXPECT_EQ(qe["fp32"]["psnr"], s["psnr"]);
  // 8-bit weights and activations of a barely trained model stay within 1 dB of it.
  EXPECT_LT(std::abs(qe["quantized"]["psnr"].get<double>() - s["psnr"].get<double>()), 1.0);
  EXPECT_TRUE(fs::exists(dir_ / "q" / "quant_stats.yaml"));
  EXPECT_EQ(s["self_ensemble"], false);
  // --self-ensemble scores the mean of the eight orientations; with --quantize-eval it is one
  // line and exit 2.
  auto e = run("igb-test --optform=sr --threads 1 --checkpoint " +
               (dir_ / "run" / "best.ckpt").string() + " --self-ensemble --out " +
               (dir_ / "e").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find(", x8 self-ensemble)"), std::string::npos) << e.output;
  auto se = nlohmann::json::parse(std::ifstream(dir_ / "e" / "test_summary.json"));
  EXPECT_EQ(se["self_ensemble"], true);
  EXPECT_NE(se["psnr"], s["psnr"]);
  auto both =
      run("igb-test --optform=sr --threads 1 --checkpoint " +
          (dir_ / "run" / "best.ckpt").string() + " --self-ensemble --quantize-eval " +
          IGB_SOURCE_DIR + "/schedules/sr/fsrcnn_ptq_int8.yaml --out " + (dir_ / "both").string());
  EXPECT_EQ(both.code, 2);
  ASSERT_EQ(both.lines().size(), 1u) << both.output;
  EXPECT_NE(both.output.find("--self-ensemble evaluates the checkpoint's own model only: leave "
                             "out --quantize-eval"),
            std::string::npos)
      << both.output;
}

// igb-test --onnx: the export of the same checkpoint, run by onnxruntime on the same images.
TEST_F(Drivers, TestEvaluatesAnOnnxExportInOnnxRuntime) {
  auto r = run(train(
      "--epochs 1 --max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = (dir_ / "run" / "best.ckpt").string();
  const std::string dynamic = (dir_ / "dynamic.onnx").string(),
                    fixed = (dir_ / "fixed.onnx").string();
  auto e = run("igb-tools export-onnx --checkpoint " + ckpt +
               " --dynamic-batch --dynamic-hw --out " + dynamic);
  ASSERT_EQ(e.code, 0) << e.output;
  const std::string test = "igb-test --optform=sr --threads 1 --checkpoint " + ckpt;
  auto t = run(test + " --onnx " + dynamic + " --out " + (dir_ / "t").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("onnxruntime (" + dynamic + ")"), std::string::npos) << t.output;
  auto s = nlohmann::json::parse(std::ifstream(dir_ / "t" / "test_summary.json"));
  EXPECT_EQ(s["onnx"]["model"], dynamic);
  // FP32 in both runtimes: the same PSNR but for float rounding.
  EXPECT_NEAR(s["onnx"]["psnr"].get<double>(), s["psnr"].get<double>(), 1e-3);
  EXPECT_NE(s["onnx"]["psnr"].get<double>(), 0.0);
  // An export of fixed size cannot take the validation images: one line, nothing written.
  ASSERT_EQ(run("igb-tools export-onnx --checkpoint " + ckpt + " --out " + fixed).code, 0);
  auto bad = run(test + " --onnx " + fixed + " --out " + (dir_ / "t2").string());
  EXPECT_EQ(bad.code, 2) << bad.output;
  ASSERT_EQ(bad.lines().size(), 1u) << bad.output;
  EXPECT_NE(bad.lines()[0].find("fixed.onnx: input 'input' has a fixed size 32 in dim 2"),
            std::string::npos)
      << bad.output;
  EXPECT_NE(bad.lines()[0].find("(export with --dynamic-hw to take any size)"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "t2" / "test_summary.json"));
}

// export-onnx --check-layers: a QAT ResNet-20's INT8 file against the model in onnxruntime, one
// quantized layer at a time; a float model has nothing to compare and writes nothing.
TEST_F(Drivers, ExportOnnxChecksAQatModelLayerByLayer) {
  auto r =
      run("igb-train --optform=classify --model resnet20_cifar --threads 1 --epochs 1 "
          "--max-batches 2 --batch-size 8 --compress " +
          std::string(IGB_SOURCE_DIR) + "/schedules/classify/resnet20_int8_qat.yaml --out " +
          (dir_ / "run").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string out = (dir_ / "q.onnx").string();
  auto e = run("igb-tools export-onnx --threads 1 --checkpoint " +
               (dir_ / "run" / "checkpoint.ckpt").string() + " --int8-qdq --dynamic-batch " +
               "--check-layers --out " + out);
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("Layer by layer in onnxruntime, input 32x3x32x32"), std::string::npos)
      << e.output;
  const auto j = nlohmann::json::parse(std::ifstream(dir_ / "q.layers.json"));
  ASSERT_EQ(j["layers"].size(), 20u);  // the input and the 19 ReLUs
  for (const auto& l : j["layers"]) EXPECT_GE(l["within_one_step"].get<double>(), 0.999) << l;
  EXPECT_EQ(j["layers"][1]["layer"], "relu.fakequantize");
  EXPECT_LT(j["output_max_abs_diff"].get<double>(), 1e-4 * j["output_max_abs"].get<double>());
  EXPECT_TRUE(fs::exists(dir_ / "q.layers.csv"));
  auto f =
      run("igb-tools export-onnx --threads 1 --model resnet20_cifar --int8-qdq --calibrate 1 "
          "--check-layers --out " +
          (dir_ / "f.onnx").string());
  EXPECT_EQ(f.code, 2) << f.output;
  ASSERT_EQ(f.lines().size(), 1u) << f.output;
  EXPECT_NE(f.lines()[0].find("--check-layers: resnet20_cifar has no fake quantization"),
            std::string::npos)
      << f.output;
  EXPECT_FALSE(fs::exists(dir_ / "f.onnx"));
  // The CPU placement writes a model's own grids: a float model has none, and is refused before
  // any calibration rather than written as the FP32 model under an INT8 label.
  auto c =
      run("igb-tools export-onnx --threads 1 --model resnet20_cifar --int8-qdq "
          "--qdq-placement cpu --calibrate 2 --out " +
          (dir_ / "c.onnx").string());
  EXPECT_EQ(c.code, 2) << c.output;
  ASSERT_EQ(c.lines().size(), 1u) << c.output;
  EXPECT_NE(c.lines()[0].find("--qdq-placement cpu writes a quantized model's own grids, and "
                              "resnet20_cifar has none (a float model)"),
            std::string::npos)
      << c.output;
  EXPECT_FALSE(fs::exists(dir_ / "c.onnx"));
}

// export-onnx: a model that cannot be traced at the given size and an output that cannot be
// written are each one line, exit 2, and no file of the three is left.
TEST_F(Drivers, ExportOnnxErrorsLeaveNoFile) {
  const fs::path out = dir_ / "e";
  fs::create_directories(out);
  std::ofstream(out / "plain") << "x";
  const std::string e = "igb-tools export-onnx --threads 1 --model ";
  expect_input_error(e + "vgg16 --input 1x3x8x8 --out " + (out / "v.onnx").string(),
                     "cannot trace vgg16 on input 1x3x8x8: ");
  expect_input_error(e + "resnet20_cifar --out " + (out / "plain" / "m.onnx").string(),
                     "plain is a file, not a folder");
  expect_input_error(e + "resnet20_cifar --out " + out.string(), "is a folder, not a file");
  expect_input_error(e + "resnet20_cifar --input 1x1x32x32 --out " + (out / "c.onnx").string(),
                     "resnet20_cifar takes 3-channel input");
  std::vector<std::string> left;
  for (const auto& f : fs::directory_iterator(out)) left.push_back(f.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"plain"});
}

// igb-tools sensitivity writes the four reports, suggest-schedule turns them into a schedule that
// igb-train accepts, and igb-test --summary sensitivity runs the same sweep after testing.
TEST_F(Drivers, SensitivitySweepSuggestAndTrain) {
  auto r = run(train(
      "--epochs 1 --max-batches 2 --batch-size 4 --model-arg d=8 --model-arg s=4 --model-arg m=1"));
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = (dir_ / "run" / "best.ckpt").string();
  const fs::path out = dir_ / "sens";
  auto s = run("igb-tools sensitivity --threads 1 --checkpoint " + ckpt +
               " --levels 0,0.3,0.6 --eval-batches 2 --out " + out.string());
  ASSERT_EQ(s.code, 0) << s.output;
  for (const char* f :
       {"sensitivity.csv", "sensitivity.json", "sensitivity.svg", "sensitivity.png"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_NE(s.output.find("psnr @0.30"), std::string::npos) << s.output;
  EXPECT_NE(s.output.find("2 evaluation images of synthetic"), std::string::npos) << s.output;
  std::ifstream csv(out / "sensitivity.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "parameter,sparsity,psnr,ssim,loss");
  const std::string yaml = (dir_ / "suggested.yaml").string();
  auto g = run("igb-tools suggest-schedule --sensitivity " + (out / "sensitivity.csv").string() +
               " --max-drop 0.5 --epochs 1:2 --out " + yaml);
  ASSERT_EQ(g.code, 0) << g.output;
  ASSERT_TRUE(fs::exists(yaml));
  auto t = run("igb-train --optform=sr --threads 1 --resume " + ckpt +
               " --epochs 2 --max-batches 2 "
               "--batch-size 4 --compress " +
               yaml + " --out " + (dir_ / "pruned").string());
  EXPECT_EQ(t.code, 0) << t.output;
  // Errors: a bad mode and an --out that is a file are one line, exit 2.
  auto bad = run("igb-tools sensitivity --checkpoint " + ckpt + " --levels 0:2:1 --out " +
                 (dir_ / "s2").string());
  EXPECT_EQ(bad.code, 2);
  ASSERT_EQ(bad.lines().size(), 1u) << bad.output;
  EXPECT_NE(bad.lines()[0].find("levels '0:2:1': 1.0000 is outside [0, 1)"), std::string::npos)
      << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "s2" / "sensitivity.csv"));
  auto test = run("igb-test --optform=sr --threads 1 --checkpoint " + ckpt +
                  " --summary sensitivity --out " + (dir_ / "t").string());
  ASSERT_EQ(test.code, 0) << test.output;
  EXPECT_TRUE(fs::exists(dir_ / "t" / "sensitivity.png"));
  EXPECT_TRUE(fs::exists(dir_ / "t" / "test_summary.json"));
}

// --optform=deblur: a tiny generator against a tiny critic; the checkpoint holds the critic, so a
// resume continues both; igb-test writes the restored images; WGAN-GP (with its penalty column)
// and no GAN train too.
// Deblurring gets every evaluation mode of the other families: post-training quantization
// (calibrated on the evaluation pairs) and an ONNX export in onnxruntime, on the same pairs.
TEST_F(Drivers, DeblurTestsItsQuantizedFormAndItsOnnxExport) {
  auto r = run(
      "igb-train --optform=deblur --data synthetic --epochs 1 --gan none --threads 1 --batch-size "
      "2 "
      "--patch-size 32 --max-batches 2 --model deblurgan --model-arg ngf=4 --model-arg blocks=1 "
      "--out " +
      (dir_ / "d").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string ckpt = (dir_ / "d" / "best.ckpt").string();
  const std::string test = "igb-test --optform=deblur --threads 1 --checkpoint " + ckpt;
  auto q = run(test + " --quantize-eval " + IGB_SOURCE_DIR +
               "/schedules/deblur/deblurgan_ptq_int8.yaml --calibration-batches 2 --out " +
               (dir_ / "q").string());
  ASSERT_EQ(q.code, 0) << q.output;
  EXPECT_NE(q.output.find("Post-training quantization ("), std::string::npos) << q.output;
  auto s = nlohmann::json::parse(std::ifstream(dir_ / "q" / "test_summary.json"));
  const auto& qe = s["quantize_eval"];
  EXPECT_EQ(qe["fp32"]["psnr"], s["psnr"]);
  EXPECT_TRUE(qe.contains("psnr_drop"));
  // 8-bit weights and activations of a small generator stay within 1 dB of it.
  EXPECT_LT(std::abs(qe["quantized"]["psnr"].get<double>() - s["psnr"].get<double>()), 1.0);
  EXPECT_NE(qe["quantized"]["psnr"], s["psnr"]);
  EXPECT_TRUE(fs::exists(dir_ / "q" / "quant_stats.yaml"));

  const std::string onnx = (dir_ / "g.onnx").string();
  auto e =
      run("igb-tools export-onnx --threads 1 --checkpoint " + ckpt + " --dynamic-hw --out " + onnx);
  ASSERT_EQ(e.code, 0) << e.output;
  auto t = run(test + " --onnx " + onnx + " --out " + (dir_ / "t").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("onnxruntime (" + onnx + ")"), std::string::npos) << t.output;
  auto o = nlohmann::json::parse(std::ifstream(dir_ / "t" / "test_summary.json"));
  // FP32 in both runtimes: the same PSNR but for float rounding, on the same pairs.
  EXPECT_NEAR(o["onnx"]["psnr"].get<double>(), o["psnr"].get<double>(), 1e-3);
  EXPECT_EQ(o["psnr"], s["psnr"]);
  EXPECT_GT(o["onnx"]["psnr"].get<double>(), 10.0);
}

TEST_F(Drivers, DeblurTrainsTestsAndResumesWithItsCritic) {
  const std::string tiny =
      " --threads 1 --batch-size 2 --patch-size 32 --max-batches 2 --model deblurgan "
      "--model-arg ngf=4 --model-arg blocks=1 --critic-arg ndf=4 ";
  const std::string run_dir = (dir_ / "d").string();
  auto r = run("igb-train --optform=deblur --data synthetic --epochs 1 --out " + run_dir + tiny);
  ASSERT_EQ(r.code, 0) << r.output;
  auto s = nlohmann::json::parse(std::ifstream(dir_ / "d" / "summary.json"));
  EXPECT_EQ(s["optform"], "deblur");
  EXPECT_EQ(s["gan"], "lsgan");
  EXPECT_GT(s["blurred_psnr"].get<double>(), 15.0);
  EXPECT_TRUE(s.contains("best_psnr"));
  std::ifstream csv(dir_ / "d" / "metrics.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("psnr,ssim,blurred_psnr,blurred_ssim,content_loss,adversarial_loss,"
                        "critic_loss,"),
            std::string::npos)
      << header;
  EXPECT_EQ(header.find("gradient_penalty"), std::string::npos) << "LSGAN has no penalty";
  auto resumed = run("igb-train --optform=deblur --data synthetic --epochs 2 --resume " +
                     (dir_ / "d" / "checkpoint.ckpt").string() + " --out " + run_dir + tiny);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(resumed.output.find("holds no training-task state"), std::string::npos)
      << resumed.output;
  // Without --critic and --critic-arg a resumed run rebuilds the critic its checkpoint records
  // (ndf 4 here, not the default's 64).
  const std::string no_critic_arg =
      " --threads 1 --batch-size 2 --patch-size 32 --max-batches 2 --model deblurgan "
      "--model-arg ngf=4 --model-arg blocks=1 ";
  auto again = run("igb-train --optform=deblur --data synthetic --epochs 3 --resume " +
                   (dir_ / "d" / "checkpoint.ckpt").string() + " --out " + run_dir + no_critic_arg);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("critic patchgan {\"n_layers\":3,\"ndf\":4}"), std::string::npos)
      << again.output;
  auto t = run("igb-test --optform=deblur --threads 1 --checkpoint " +
               (dir_ / "d" / "best.ckpt").string() + " --save-images " + (dir_ / "img").string() +
               " --out " + (dir_ / "t").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("PSNR gain over the blurred input"), std::string::npos) << t.output;
  EXPECT_TRUE(fs::exists(dir_ / "img" / "synthetic_0_restored.png"));
  auto e = run("igb-test --optform=deblur --threads 1 --self-ensemble --checkpoint " +
               (dir_ / "d" / "best.ckpt").string() + " --out " + (dir_ / "e").string());
  ASSERT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("; x8 self-ensemble)"), std::string::npos) << e.output;
  EXPECT_EQ(nlohmann::json::parse(std::ifstream(dir_ / "e" / "test_summary.json"))["self_ensemble"],
            true);
  for (const char* gan : {"wgan-gp", "none"}) {
    auto g = run("igb-train --optform=deblur --data synthetic --epochs 1 --gan " +
                 std::string(gan) + " --out " + (dir_ / gan).string() +
                 " --threads 1 --batch-size 2 --patch-size 32 --max-batches 2 --model deblurgan "
                 "--model-arg ngf=4 --model-arg blocks=1");
    EXPECT_EQ(g.code, 0) << gan << "\n" << g.output;
    std::ifstream gcsv(dir_ / gan / "metrics.csv");
    std::string gheader;
    std::getline(gcsv, gheader);
    EXPECT_EQ(gheader.find("gradient_penalty") != std::string::npos, std::string(gan) == "wgan-gp")
        << gan << ": " << gheader;
  }
}

// schedules/deblur/ run unchanged on the default generator (deblurgan_small): AGP reaches its 50%
// in the ten layers it names; filter pruning thins the three residual blocks' first convs to half
// their filters at epoch 10 (94,765,056 -> 66,453,504 MACs at 64x64, see the schedule's comment).
TEST_F(Drivers, DeblurSchedulesRunUnchanged) {
  const std::string quick = " --gan none --threads 1 --batch-size 2 --max-batches 1 ";
  auto agp = run("igb-train --optform=deblur --data synthetic --epochs 15 --compress " +
                 std::string(IGB_SOURCE_DIR) + "/schedules/deblur/deblurgan_agp.yaml --out " +
                 (dir_ / "agp").string() + quick);
  ASSERT_EQ(agp.code, 0) << agp.output;
  EXPECT_NE(agp.output.find("perceptual loss: off (no --perceptual-weights)"), std::string::npos);
  auto a = nlohmann::json::parse(std::ifstream(dir_ / "agp" / "summary.json"));
  EXPECT_NEAR(a["sparsity"].get<double>(), 0.4914, 0.002);
  auto fp =
      run("igb-train --optform=deblur --data synthetic --epochs 11 --compress " +
          std::string(IGB_SOURCE_DIR) + "/schedules/deblur/deblurgan_filter_prune.yaml --out " +
          (dir_ / "fp").string() + quick);
  ASSERT_EQ(fp.code, 0) << fp.output;
  auto f = nlohmann::json::parse(std::ifstream(dir_ / "fp" / "summary.json"));
  ASSERT_EQ(f["thinning"].size(), 1u) << f.dump(2);
  EXPECT_EQ(f["thinning"][0]["epoch"], 10);
  EXPECT_EQ(f["thinning"][0]["macs_before"], 94765056);
  EXPECT_EQ(f["thinning"][0]["macs_after"], 66453504);
}

// The synthetic blur options and the perceptual loss's weights are checked before anything runs.
TEST_F(Drivers, DeblurBlurOptionsAndPerceptualWeightsAreChecked) {
  const std::string out = " --epochs 1 --max-batches 1 --threads 1 --out " + (dir_ / "x").string();
  auto r = run("igb-train --optform=deblur --data synthetic --blur-length 9 3" + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--blur-length 9.0 3.0: needs 1 <= MIN <= MAX <= 21"), std::string::npos)
      << r.output;
  // A crop larger than the training images is refused before anything is made.
  r = run("igb-train --optform=deblur --data synthetic --patch-size 256" + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--patch-size 256 is larger than the 144x144 synthetic training images"),
            std::string::npos)
      << r.output;
  // Two folders of pairs are the data: --data beside them would be ignored.
  r = run("igb-train --optform=deblur --data synthetic --blur-dir " + (dir_ / "b").string() +
          " --sharp-dir " + (dir_ / "s").string() + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--blur-dir and --sharp-dir are the training data; give them or --data "
                          "synthetic, not both"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
  // igb-test blurs the synthetic pairs as the run did: the same blurred PSNR as its validation.
  r = run(
      "igb-train --optform=deblur --data synthetic --blur-length 3 4 --straight-blur 0 --gan none "
      "--batch-size 2 --model-arg ngf=4 --model-arg blocks=1" +
      out);
  ASSERT_EQ(r.code, 0) << r.output;
  const auto trained = nlohmann::json::parse(std::ifstream(dir_ / "x" / "summary.json"));
  EXPECT_NE(trained["data"].get<std::string>().find("motion blur of 3-4 px, 0% straight"),
            std::string::npos)
      << trained.dump();
  r = run("igb-test --optform=deblur --threads 1 --checkpoint " +
          (dir_ / "x" / "checkpoint.ckpt").string() + " --out " + (dir_ / "t").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto tested = nlohmann::json::parse(std::ifstream(dir_ / "t" / "test_summary.json"));
  EXPECT_DOUBLE_EQ(tested["blurred_psnr"].get<double>(), trained["blurred_psnr"].get<double>());
  EXPECT_GT(trained["blurred_psnr"].get<double>(), 27.5);  // milder than the default's 26.90
  fs::remove_all(dir_ / "x");
  const std::string missing = (dir_ / "vgg19.pt").string();
  r = run("igb-train --optform=deblur --data synthetic --perceptual-weights " + missing + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--perceptual-weights " + missing + " does not exist"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "x" / "summary.json"));
}

TEST_F(Drivers, EarlyExitTrainingReportsEachExitAndResumes) {
  // CIFAR-format files made by make-cifar: 40 training and 20 test images of the shapes.
  auto mk =
      run("igb-tools make-cifar --out " + (dir_ / "shapes").string() + " --train 40 --test 20");
  ASSERT_EQ(mk.code, 0) << mk.output;
  const std::string base =
      "igb-train --optform=classify --model resnet20_cifar_earlyexit "
      "--threads 1 --batch-size 8 --data " +
      (dir_ / "shapes").string();
  auto r = run(base + " --epochs 1 --earlyexit_lossweights 0.3 --earlyexit_thresholds 1.5 --out " +
               (dir_ / "run").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Accuracy Stats for exit 1: top1 = "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Totals for entire network with early exits: top1 = "), std::string::npos)
      << r.output;
  auto summary = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  const auto& ee = summary["early_exit"];
  EXPECT_EQ(ee["lossweights"], nlohmann::json::array({0.3}));
  ASSERT_EQ(ee["exits"].size(), 2u);
  // Distiller's totals: each exit's top-1 weighted by the share leaving there.
  const double p0 = ee["exits"][0]["taken_pct"].get<double>();
  const double p1 = ee["exits"][1]["taken_pct"].get<double>();
  EXPECT_NEAR(p0 + p1, 100.0, 1e-9);
  EXPECT_NEAR(
      summary["top1"].get<double>(),
      (p0 * ee["exits"][0]["top1"].get<double>() + p1 * ee["exits"][1]["top1"].get<double>()) /
          100.0,
      1e-6);
  std::ifstream csv(dir_ / "run" / "metrics.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_NE(header.find("exit0_taken_pct,exit0_top1,exit0_top5,exit0_top1_all,exit0_loss"),
            std::string::npos)
      << header;
  // The weights and thresholds carry over on resume.
  auto again = run("igb-train --optform=classify --threads 1 --batch-size 8 --epochs 2 --resume " +
                   (dir_ / "run" / "checkpoint.ckpt").string());
  ASSERT_EQ(again.code, 0) << again.output;
  summary = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  EXPECT_EQ(summary["early_exit"]["thresholds"], nlohmann::json::array({1.5}));
  // Bad weights, missing weights and weights for a model without exits: one line, exit 2.
  const std::string out = " --epochs 1 --out " + (dir_ / "bad").string();
  auto bad = run(base + " --earlyexit_lossweights 0.6 0.5" + out);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("resnet20_cifar_earlyexit has 1 early exit, give 1 weight"),
            std::string::npos)
      << bad.output;
  bad = run(base + out);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--earlyexit_lossweights"), std::string::npos) << bad.output;
  bad = run("igb-train --optform=classify --model resnet20_cifar --threads 1 --data " +
            (dir_ / "shapes").string() + " --earlyexit_lossweights 0.3" + out);
  EXPECT_EQ(bad.code, 2) << bad.output;
  EXPECT_NE(bad.output.find("resnet20_cifar has no early exits"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "summary.json"));
}

TEST_F(Drivers, ClassifyTrainsOnCifarFilesAndTests) {
  write_tiny_cifar(dir_ / "cifar");
  auto r =
      run("igb-train --optform=classify --model simplenet_cifar --threads 1 --epochs 1 "
          "--batch-size 8 --data " +
          (dir_ / "cifar").string() + " --out " + (dir_ / "run").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("==> epoch 0/0"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Top1: "), std::string::npos) << r.output;
  auto summary = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  for (const char* k : {"top1", "top5", "loss", "best_top1", "params"})
    EXPECT_TRUE(summary.contains(k)) << k;
  EXPECT_EQ(summary["params"], 62006);
  EXPECT_EQ(summary["macs"], 651720);
  EXPECT_EQ(summary["dataset"], "cifar10");

  auto t = run("igb-test --optform=classify --threads 1 --checkpoint " +
               (dir_ / "run" / "best.ckpt").string() + " --data " + (dir_ / "cifar").string());
  ASSERT_EQ(t.code, 0) << t.output;
  auto ts = nlohmann::json::parse(std::ifstream(dir_ / "run" / "test_summary.json"));
  EXPECT_EQ(ts["images"], 20);
  EXPECT_NEAR(ts["top1"].get<double>(), summary["top1"].get<double>(), 1e-9);

  // The reports the original tool's tester wrote, into the output folder.
  auto sum =
      run("igb-test --optform=classify --threads 1 --checkpoint " +
          (dir_ / "run" / "best.ckpt").string() + " --data " + (dir_ / "cifar").string() +
          " --out " + (dir_ / "reports").string() + " --summary sparsity,macs,graph,profile");
  ASSERT_EQ(sum.code, 0) << sum.output;
  for (const char* f :
       {"test_summary.json", "sparsity.csv", "sparsity.json", "macs.csv", "macs.json", "graph.svg",
        "graph.dot", "profile.json", "profile_trace.json"})
    EXPECT_TRUE(fs::exists(dir_ / "reports" / f)) << f;
  auto macs = nlohmann::json::parse(std::ifstream(dir_ / "reports" / "macs.json"));
  EXPECT_EQ(macs["total_macs"], 651720);
  auto sparsity = nlohmann::json::parse(std::ifstream(dir_ / "reports" / "sparsity.json"));
  EXPECT_EQ(sparsity["params"].size(), 5u);
  auto profile = nlohmann::json::parse(std::ifstream(dir_ / "reports" / "profile.json"));
  EXPECT_EQ(profile["batches"][0]["layers"][0]["name"], "conv1");
  EXPECT_NE(sum.output.find("Total MACs: 651,720"), std::string::npos) << sum.output;
  auto bad_summary = run("igb-test --optform=classify --checkpoint " +
                         (dir_ / "run" / "best.ckpt").string() + " --summary macs,flops");
  EXPECT_EQ(bad_summary.code, 2);
  EXPECT_NE(bad_summary.output.find("flops"), std::string::npos) << bad_summary.output;

  auto sp = run("igb-tools sparsity --checkpoint " + (dir_ / "run" / "best.ckpt").string() +
                " --csv " + (dir_ / "sp.csv").string());
  ASSERT_EQ(sp.code, 0) << sp.output;
  EXPECT_NE(sp.output.find("Total sparsity:"), std::string::npos) << sp.output;
  std::ifstream csv(dir_ / "sp.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header,
            "Name,Shape,NNZ (dense),NNZ (sparse),Cols (%),Rows (%),Ch (%),2D (%),3D (%),Fine "
            "(%),Std,Mean,Abs-Mean");

  // Testing an SR checkpoint as a classifier is refused.
  auto wrong = run("igb-test --optform=sr --checkpoint " + (dir_ / "run" / "best.ckpt").string());
  EXPECT_EQ(wrong.code, 2);
  EXPECT_NE(wrong.output.find("not sr"), std::string::npos) << wrong.output;

  // A truncated batch file is named.
  fs::resize_file(dir_ / "cifar" / "test_batch.bin", 5000);
  auto bad = run("igb-train --optform=classify --data " + (dir_ / "cifar").string() + " --out " +
                 (dir_ / "run2").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.output.find("test_batch.bin is truncated"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir_ / "run2"));
}

TEST_F(Drivers, CompressScheduleErrorsAndThePythonToolSchedules) {
  std::ofstream(dir_ / "bad.yaml")
      << "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
         "    initial_sparsity: 0.1\n    final_sparsity: 0.5\n    weights: [mid_part.1.weigth]\n"
         "policies:\n  - pruner: {instance_name: p}\n    starting_epoch: 0\n    ending_epoch: 2\n";
  expect_input_error(train("--compress " + (dir_ / "bad.yaml").string()),
                     "bad.yaml:7: 'mid_part.1.weigth' is not a parameter of the model; closest: "
                     "mid_part.1.weight");
  expect_input_error(train("--compress " + (dir_ / "none.yaml").string()), "does not exist");
  // The original tool's schedules run unchanged on fsrcnn.
  const std::string examples =
      std::string(IGB_SOURCE_DIR) + "/tests/fixtures/python_tool_schedules/";
  auto r = run(
      train("--epochs 1 --max-batches 2 --batch-size 4 --compress " + examples + "agp_prune.yaml"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("sparsity"), std::string::npos);
  auto summary = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  EXPECT_GT(summary["sparsity"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "schedule.yaml"));
  fs::remove_all(dir_ / "run");
  // filter_prune.yaml prunes and thins at epoch 0: the run goes on with the thin model, and its
  // checkpoints reload in their thinned shape for testing, tools and resuming.
  auto f = run(train("--epochs 1 --max-batches 2 --batch-size 4 --compress " + examples +
                     "filter_prune.yaml"));
  ASSERT_EQ(f.code, 0) << f.output;
  EXPECT_NE(f.output.find("(FilterRemover) at epoch 0: removed"), std::string::npos) << f.output;
  EXPECT_NE(f.output.find("mid_part.9.0: filters 56 -> 34"), std::string::npos) << f.output;
  auto thin = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  EXPECT_LT(thin["macs"].get<int64_t>(), 12'763'136);  // dense FSRCNN x3 on 32x32
  EXPECT_LT(thin["params"].get<int64_t>(), 12'809);
  ASSERT_EQ(thin["thinning"].size(), 1u) << thin.dump();
  EXPECT_EQ(thin["thinning"][0]["macs_before"], 12'763'136);
  EXPECT_EQ(thin["thinning"][0]["macs_after"], thin["macs"]);
  EXPECT_TRUE(thin["thinning"][0]["metrics"].contains("psnr"));
  auto t = run("igb-test --optform=sr --threads 1 --checkpoint " +
               (dir_ / "run" / "checkpoint.ckpt").string());
  EXPECT_EQ(t.code, 0) << t.output;
  auto macs = run("igb-tools macs --checkpoint " + (dir_ / "run" / "checkpoint.ckpt").string());
  EXPECT_NE(macs.output.find("Total MACs: "), std::string::npos) << macs.output;
  EXPECT_NE(macs.output.find("1x34x32x32"), std::string::npos) << macs.output;
  auto resumed =
      run("igb-train --optform=sr --threads 1 --epochs 2 --max-batches 2 --batch-size 4 --resume " +
          (dir_ / "run" / "checkpoint.ckpt").string());
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  auto again = nlohmann::json::parse(std::ifstream(dir_ / "run" / "summary.json"));
  EXPECT_EQ(again["macs"], thin["macs"]);
  EXPECT_EQ(again["epochs"], 2);
}

TEST_F(Drivers, ToolsThinACheckpoint) {
  // A short run pruned by filters but not thinned, then thinned by igb-tools thin.
  std::ofstream(dir_ / "prune.yaml")
      << "version: 1\npruners:\n  p:\n    class: L1RankedStructureParameterPruner\n"
         "    reg_regims:\n      mid_part.0.0.weight: [0.5, Filters]\n"
         "policies:\n  - pruner: {instance_name: p}\n    epochs: [0]\n";
  auto r = run(train("--epochs 1 --max-batches 2 --batch-size 4 --compress " +
                     (dir_ / "prune.yaml").string()));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto ckpt = (dir_ / "run" / "checkpoint.ckpt").string();
  auto t = run("igb-tools thin --checkpoint " + ckpt + " --out " + (dir_ / "thin.ckpt").string());
  ASSERT_EQ(t.code, 0) << t.output;
  EXPECT_NE(t.output.find("mid_part.0.0: filters 12 -> 6"), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("MACs"), std::string::npos) << t.output;
  auto test = run("igb-test --optform=sr --threads 1 --checkpoint " +
                  (dir_ / "thin.ckpt").string() + " --out " + (dir_ / "t").string());
  ASSERT_EQ(test.code, 0) << test.output;
  auto dense_test = run("igb-test --optform=sr --threads 1 --checkpoint " + ckpt + " --out " +
                        (dir_ / "d").string());
  auto a = nlohmann::json::parse(std::ifstream(dir_ / "t" / "test_summary.json"));
  auto b = nlohmann::json::parse(std::ifstream(dir_ / "d" / "test_summary.json"));
  EXPECT_NEAR(a["psnr"].get<double>(), b["psnr"].get<double>(),
              1e-4);  // same outputs, fewer filters
  // Nothing left to remove, and the original is never overwritten.
  auto nothing = run("igb-tools thin --checkpoint " + (dir_ / "thin.ckpt").string() + " --out " +
                     (dir_ / "thin2.ckpt").string());
  EXPECT_EQ(nothing.code, 2);
  EXPECT_NE(nothing.output.find("nothing written"), std::string::npos) << nothing.output;
  EXPECT_FALSE(fs::exists(dir_ / "thin2.ckpt"));
  auto same = run("igb-tools thin --checkpoint " + ckpt + " --out " + ckpt);
  EXPECT_EQ(same.code, 2);
  EXPECT_NE(same.output.find("--out must differ"), std::string::npos) << same.output;
}

TEST_F(Drivers, ToolsListsRegistries) {
  auto r = run("igb-tools list models");
  EXPECT_EQ(r.code, 0);
  for (const char* m :
       {"srcnn", "fsrcnn", "espcn", "vdsr", "resnet20_cifar", "densenet_cifar", "mobilenet_v2"})
    EXPECT_NE(r.output.find(m), std::string::npos) << m;
  auto pruners = run("igb-tools list pruners");
  EXPECT_EQ(pruners.code, 0);
  for (const char* c :
       {"AutomatedGradualPruner", "L1RankedStructureParameterPruner_AGP", "SensitivityPruner"})
    EXPECT_NE(pruners.output.find(c), std::string::npos) << c;
  EXPECT_NE(run("igb-tools list lr_schedulers").output.find("MultiStepMultiGammaLR"),
            std::string::npos);
  auto bad = run("igb-tools list nothing");
  EXPECT_EQ(bad.code, 2);
  auto datasets = run("igb-tools list datasets");
  EXPECT_NE(datasets.output.find("classify/cifar10"), std::string::npos) << datasets.output;
  EXPECT_NE(run("igb-tools list quantizers").output.find("DorefaQuantizer"), std::string::npos);
}

TEST_F(Drivers, ToolsReportsOnZooModels) {
  auto macs = run("igb-tools macs --model resnet20_cifar --json " + (dir_ / "m.json").string());
  ASSERT_EQ(macs.code, 0) << macs.output;
  EXPECT_NE(macs.output.find("Total MACs: 40,551,040"), std::string::npos) << macs.output;
  auto j = nlohmann::json::parse(std::ifstream(dir_ / "m.json"));
  EXPECT_EQ(j["total_params"], 269722);
  EXPECT_EQ(j["input"], (std::vector<int64_t>{1, 3, 32, 32}));
  auto big = run("igb-tools macs --model resnet18 --input 1x3x112x112");
  EXPECT_NE(big.output.find("1x3x112x112"), std::string::npos) << big.output;

  auto png = run("igb-tools draw --model densenet_cifar --model-arg depth=16 --out " +
                 (dir_ / "d.png").string());
  ASSERT_EQ(png.code, 0) << png.output;
  std::ifstream in(dir_ / "d.png", std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");

  auto prof = run(
      "igb-tools profile --model simplenet_cifar --batch-sizes 1,8 --top 5 --repeats 1 --trace " +
      (dir_ / "t.json").string() + " --json " + (dir_ / "p.json").string());
  ASSERT_EQ(prof.code, 0) << prof.output;
  EXPECT_NE(prof.output.find("Top operators of simplenet_cifar, batch 8"), std::string::npos)
      << prof.output;
  auto trace = nlohmann::json::parse(std::ifstream(dir_ / "t.json"));
  EXPECT_GT(trace["traceEvents"].size(), 20u);
  auto p = nlohmann::json::parse(std::ifstream(dir_ / "p.json"));
  EXPECT_EQ(p["batches"][1]["batch"], 8);

  expect_input_error("igb-tools draw --model resnet20_cifar --out " + (dir_ / "g.gif").string(),
                     "must be .svg, .png or .dot");
  EXPECT_FALSE(fs::exists(dir_ / "g.gif"));
  expect_input_error("igb-tools macs --model resnet20_cifar --checkpoint x.ckpt",
                     "either --model NAME or --checkpoint");
  expect_input_error("igb-tools macs --model resnet20_cifar --input 1x3xx32", "not a shape");
  expect_input_error("igb-tools profile --model simplenet_cifar --batch-sizes 1,0",
                     "--batch-sizes");
  expect_input_error("igb-tools macs --model fsrcnn --model-arg scale", "is not KEY=VALUE");
}

}  // namespace
