// The files written beside an exported model for TensorRT (F.trtexec.sh, F.json), and
// `igb-tools run`, which runs a model on a .npy tensor for comparing with other runtimes.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/npy.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_trt.h"
#include "options/tool_commands/tool_command.h"
#include "options/tool_commands/tool_model.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"

namespace igb::deploy {

using tools::graph_of;
using tools::make;

namespace {

namespace fs = std::filesystem;

/// Runs `script` with a stand-in trtexec that prints each argument on its own line; returns the
/// arguments trtexec received.
std::vector<std::string> trtexec_args_of(const fs::path& script, const std::string& args,
                                         const fs::path& dir) {
  const fs::path fake = dir / "fake_trtexec";
  write_text_atomically(fake, "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n");
  fs::permissions(fake, fs::perms::owner_all);
  const std::string cmd = "TRTEXEC=" + fake.string() + " " + script.string() + " " + args;
  std::vector<std::string> out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[1024];
  while (p && std::fgets(buf, sizeof buf, p)) {
    std::string line = buf;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    out.push_back(line);
  }
  EXPECT_EQ(p ? ::pclose(p) : -1, 0) << cmd;
  return out;
}

/// Exports zoo model `name` into `dir` and writes the TensorRT files beside it.
TrtFiles export_with_trt_files(const std::string& name, bool dynamic, const fs::path& dir,
                               OnnxExportReport* report = nullptr) {
  auto m = make(name);
  const auto graph = graph_of(m, name);
  const auto r =
      export_onnx(*m, graph, OnnxExportOptions().dynamic_batch(dynamic).dynamic_hw(dynamic),
                  dir / (name + ".onnx"));
  if (report) *report = r;
  return write_trt_files(r, {m->input_shape()});
}

nlohmann::json read_trt_json(const fs::path& path) {
  return nlohmann::json::parse(read_text_file(path));
}

/// `igb-tools ARGS...` through the subcommands, in this process (errors throw).
int run_tool_command(std::vector<std::string> args) {
  args.insert(args.begin(), "igb-tools");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CLI::App app("igb-tools");
  app.require_subcommand(1);
  options::ToolCommandSet commands(app);
  app.parse(static_cast<int>(argv.size()), argv.data());
  return commands.run();
}

/// fsrcnn (scale 2, m = 1) saved as a checkpoint at `path`, with the model returned.
models::Model save_fsrcnn_checkpoint(const fs::path& path) {
  const nlohmann::json opts = {{"scale", 2}, {"m", 1}};
  auto model = make("fsrcnn", opts);
  CheckpointMeta meta;
  meta.optform = "sr";
  meta.model = "fsrcnn";
  meta.model_options = opts;
  save_checkpoint(path, meta, {model.get(), nullptr, nullptr, nullptr});
  return model;
}

}  // namespace

TEST(OnnxTrt, DynamicFsrcnnGetsAProfileForItsInput) {
  test::TempDir tmp;
  OnnxExportReport r;
  const auto files = export_with_trt_files("fsrcnn", true, tmp.path(), &r);
  EXPECT_EQ(files.script, tmp / "fsrcnn.trtexec.sh");
  EXPECT_EQ(files.json, tmp / "fsrcnn.json");
  const std::string script = read_text_file(files.script);
  EXPECT_EQ(script.rfind("#!/bin/sh\n", 0), 0u);
  EXPECT_NE(fs::status(files.script).permissions() & fs::perms::owner_exec, fs::perms::none);
  // The traced input is 1x1x32x32: N 1/8/32, H and W 16 / 32 / 4 x 32.
  const std::vector<std::string> expected_tail = {
      "--minShapes=input:1x1x16x16", "--optShapes=input:8x1x32x32",
      "--maxShapes=input:32x1x128x128", "--memPoolSize=workspace:1024", "--verbose"};
  for (const std::string version : {"8", "10"}) {
    auto args = trtexec_args_of(files.script, version + " --verbose", tmp.path());
    ASSERT_EQ(args.size(), 7u) << script;
    EXPECT_EQ(args[0], "--onnx=" + (tmp / "fsrcnn.onnx").string());
    EXPECT_EQ(args[1], "--saveEngine=" + (tmp / "fsrcnn.plan").string());
    EXPECT_EQ(std::vector<std::string>(args.begin() + 2, args.end()), expected_tail) << version;
  }
  // TensorRT 10 is the default.
  EXPECT_EQ(trtexec_args_of(files.script, "", tmp.path()).size(), 6u);

  const auto j = read_trt_json(files.json);
  EXPECT_EQ(j["model"], "fsrcnn.onnx");
  EXPECT_EQ(j["engine"], "fsrcnn.plan");
  EXPECT_EQ(j["opset"], 13);
  EXPECT_EQ(j["precision"], "fp32");
  EXPECT_EQ(j["producer"]["name"], "igb");
  EXPECT_FALSE(j.contains("quantization"));
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "input");
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 1, "H", "W"])"));
  EXPECT_EQ(j["inputs"][0]["profile"]["max"], nlohmann::json::parse("[32, 1, 128, 128]"));
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["name"], "output");
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::parse(R"(["N", 1, "H_out", "W_out"])"));
}

TEST(OnnxTrt, StaticExportHasNoShapeFlags) {
  test::TempDir tmp;
  const auto files = export_with_trt_files("resnet20_cifar", false, tmp.path());
  const std::string script = read_text_file(files.script);
  EXPECT_EQ(script.find("Shapes"), std::string::npos) << script;
  const auto args = trtexec_args_of(files.script, "8", tmp.path());
  EXPECT_EQ(args,
            (std::vector<std::string>{"--onnx=" + (tmp / "resnet20_cifar.onnx").string(),
                                      "--saveEngine=" + (tmp / "resnet20_cifar.plan").string(),
                                      "--memPoolSize=workspace:1024"}));
  const auto j = read_trt_json(files.json);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::parse("[1, 3, 32, 32]"));
  EXPECT_FALSE(j["inputs"][0].contains("profile"));
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::parse("[1, 10]"));
}

TEST(OnnxTrt, PrecisionFlagsAndScalesFollowTheReport) {
  test::TempDir tmp;
  OnnxExportReport r;
  r.path = tmp / "q.onnx";
  r.inputs = {{"input", {"N", "3", "32", "32"}}};
  r.outputs = {{"output", {"N", "10"}}};
  r.precision = "int8";
  r.activation_scales = {{"input", 0.5}};
  r.weight_scales = {{"conv1.weight", {0.25f, 0.125f}}};
  auto files = write_trt_files(r, {{1, 3, 32, 32}});
  auto a8 = trtexec_args_of(files.script, "8", tmp.path());
  auto a10 = trtexec_args_of(files.script, "10", tmp.path());
  ASSERT_EQ(a8.size(), 8u);
  ASSERT_EQ(a10.size(), 7u);
  EXPECT_EQ(a8[2], "--int8");
  EXPECT_EQ(a8[3], "--fp16");
  EXPECT_EQ(a8[4], "--minShapes=input:1x3x32x32");
  EXPECT_EQ(a10[2], "--stronglyTyped");
  EXPECT_EQ(a10[4], "--optShapes=input:8x3x32x32");
  const auto j = read_trt_json(files.json);
  EXPECT_EQ(j["precision"], "int8");
  EXPECT_EQ(j["quantization"]["activations"]["input"], 0.5);
  EXPECT_EQ(j["quantization"]["weights"]["conv1.weight"], nlohmann::json::parse("[0.25, 0.125]"));

  r.precision = "fp16";
  r.activation_scales.clear();
  r.weight_scales.clear();
  files = write_trt_files(r, {{1, 3, 32, 32}});
  for (const std::string v : {"8", "10"})
    EXPECT_EQ(trtexec_args_of(files.script, v, tmp.path())[2], "--fp16") << v;
  EXPECT_FALSE(read_trt_json(files.json).contains("quantization"));
}

TEST(OnnxTrt, SpatialRangesClampToTheTracedSize) {
  OnnxExportReport r;
  r.path = "m.onnx";
  r.inputs = {{"a", {"1", "3", "H", "W"}}, {"b", {"N", "3", "H", "W"}}};
  const auto p = trt_profiles(r, {{1, 3, 8, 512}, {1, 3, 2000, 300}});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].min, (Shape{1, 3, 8, 16}));  // never above the traced size
  EXPECT_EQ(p[0].opt, (Shape{1, 3, 8, 512}));
  EXPECT_EQ(p[0].max, (Shape{1, 3, 32, 1024}));     // 4x, capped at 1024
  EXPECT_EQ(p[1].max, (Shape{32, 3, 2000, 1024}));  // never below the traced size
  const auto q = trt_profiles(r, {{1, 3, 64, 64}, {1, 3, 64, 64}},
                              TrtProfileOptions().opt_batch(4).max_batch(4).max_spatial(200));
  EXPECT_EQ(q[1].opt, (Shape{4, 3, 64, 64}));
  EXPECT_EQ(q[1].max, (Shape{4, 3, 200, 200}));
  EXPECT_THROW(trt_profiles(r, {{1, 3, 8, 8}}), InputError);
  EXPECT_THROW(trt_profiles(r, {{1, 3, 8, 8}, {1, 3, 8}}), InputError);
  EXPECT_THROW(trt_profiles(r, {{1, 3, 8, 8}, {1, 3, 8, 8}}, TrtProfileOptions().opt_batch(64)),
               InputError);
}

// --runtime eager is the model's forward bit for bit; the default, the inference form, within
// float rounding of it.
TEST(ToolRun, OutputEqualsTheModelsForwardInBothRuntimes) {
  test::TempDir tmp;
  auto model = save_fsrcnn_checkpoint(tmp / "m.ckpt");
  torch::manual_seed(7);
  const auto x = torch::rand({2, 1, 20, 27});
  write_npy(tmp / "x.npy", x);
  const auto run = [&](const std::string& runtime) {
    const auto out = tmp / ("out/y_" + runtime + ".npy");
    EXPECT_EQ(run_tool_command({"run", "--checkpoint", (tmp / "m.ckpt").string(), "--input",
                                (tmp / "x.npy").string(), "--output", out.string(), "--threads",
                                "1", "--runtime", runtime}),
              kExitOk);
    return read_npy(out);
  };
  const auto eager = run("eager"), inference = run("inference");
  model->eval();
  torch::NoGradGuard no_grad;
  const auto expected = model->forward(x);
  ASSERT_EQ(eager.sizes(), expected.sizes());
  EXPECT_TRUE(torch::equal(eager, expected));
  ASSERT_EQ(inference.sizes(), expected.sizes());
  EXPECT_LE((inference - expected).abs().max().item<double>(),
            1e-5 * expected.abs().max().item<double>());
}

TEST(ToolRun, RandomInputAndCompare) {
  test::TempDir tmp;
  save_fsrcnn_checkpoint(tmp / "m.ckpt");
  const std::vector<std::string> base = {"run",
                                         "--checkpoint",
                                         (tmp / "m.ckpt").string(),
                                         "--input",
                                         (tmp / "x.npy").string(),
                                         "--output",
                                         (tmp / "y.npy").string()};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return run_tool_command(extra);
  };
  EXPECT_EQ(with({"--random-input", "1x1x20x24", "--seed", "3"}), kExitOk);
  torch::manual_seed(3);
  EXPECT_TRUE(torch::equal(read_npy(tmp / "x.npy"), torch::rand({1, 1, 20, 24})));
  const auto y = read_npy(tmp / "y.npy");
  const float scale = y.abs().max().item<float>();
  write_npy(tmp / "close.npy", y + 0.5e-4 * scale);
  write_npy(tmp / "far.npy", y + 2e-4 * scale);
  write_npy(tmp / "other.npy", y.reshape({1, 1, -1}));
  EXPECT_EQ(with({"--compare", (tmp / "close.npy").string()}), kExitOk);
  EXPECT_EQ(with({"--compare", (tmp / "far.npy").string()}), kExitFailure);
  EXPECT_EQ(with({"--compare", (tmp / "far.npy").string(), "--tolerance", "1e-3"}), kExitOk);
  EXPECT_THROW(with({"--compare", (tmp / "other.npy").string()}), InputError);
}

TEST(ToolRun, BadInputsAreOneLineNamingTheFile) {
  test::TempDir tmp;
  save_fsrcnn_checkpoint(tmp / "m.ckpt");
  auto error_of = [&](const fs::path& input) {
    try {
      run_tool_command({"run", "--checkpoint", (tmp / "m.ckpt").string(), "--input", input.string(),
                        "--output", (tmp / "y.npy").string()});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  write_npy(tmp / "rgb.npy", torch::rand({1, 3, 16, 16}));
  EXPECT_EQ(error_of(tmp / "rgb.npy"), (tmp / "rgb.npy").string() +
                                           ": 3 channels (shape 1x3x16x16), but fsrcnn takes "
                                           "1-channel input like 1x1x32x32");
  write_npy(tmp / "flat.npy", torch::rand({4, 16}));
  EXPECT_NE(error_of(tmp / "flat.npy").find((tmp / "flat.npy").string() + ": a 2-D tensor"),
            std::string::npos);
  write_text_atomically(tmp / "junk.npy", "not a numpy file");
  const std::string junk = error_of(tmp / "junk.npy");
  EXPECT_EQ(junk.rfind((tmp / "junk.npy").string(), 0), 0u) << junk;
  EXPECT_NE(error_of(tmp / "missing.npy").find("missing.npy"), std::string::npos);
  for (const auto* f : {"rgb.npy", "flat.npy", "junk.npy"})
    EXPECT_EQ(error_of(tmp / f).find('\n'), std::string::npos) << f;
  EXPECT_FALSE(fs::exists(tmp / "y.npy"));
}

}  // namespace igb::deploy

namespace igb::deploy {
namespace {

// igb-tools thin removes zeroed filters; --round-to keeps some so widths are multiples, shows
// the MAC saving it gives up, and the thinned model computes what the checkpoint's did.
TEST(ToolThin, RoundToKeepsWidthsMultiplesAndTheOutput) {
  test::TempDir tmp;
  auto model = make("resnet20_cifar");
  {
    torch::NoGradGuard no_grad;
    auto p = model->named_parameters();
    for (int64_t c = 0; c < 10; ++c)
      for (const char* t : {"layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias"})
        p[t][c].zero_();
  }
  CheckpointMeta meta;
  meta.optform = "classify";
  meta.model = "resnet20_cifar";
  save_checkpoint(tmp / "m.ckpt", meta, {model.get(), nullptr, nullptr, nullptr});
  auto thin = [&](const std::string& round_to, const std::string& out) {
    return run_tool_command({"thin", "--checkpoint", (tmp / "m.ckpt").string(), "--out",
                             (tmp / out).string(), "--round-to", round_to, "--threads", "1"});
  };
  testing::internal::CaptureStdout();
  EXPECT_EQ(thin("8", "r8.ckpt"), kExitOk);
  const std::string table = testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("kept 2 zeroed groups to round widths (--round-to 8)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Without rounding"), std::string::npos) << table;
  // 16 -> 6 saves 10/16 of two convolutions' MACs; rounding to 8 gives up 2 of those 10.
  EXPECT_NE(table.find("20.0%"), std::string::npos) << table;
  EXPECT_EQ(thin("1", "r1.ckpt"), kExitOk);
  // auto keeps the width each layer runs fastest at here: 6 or 8 (written), or the dense 16
  // (nothing removed: an InputError saying so, nothing written).
  std::string auto_error;
  try {
    EXPECT_EQ(thin("auto", "auto.ckpt"), kExitOk);
  } catch (const InputError& e) {
    auto_error = e.what();
  }
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(2);
  const auto x = torch::randn({2, 3, 32, 32});
  const auto expected = model->forward(x);
  for (const auto& [file, width] :
       {std::pair<std::string, int64_t>{"r8.ckpt", 8}, {"r1.ckpt", 6}}) {
    auto thinned = options::load_tool_model("", {}, (tmp / file).string(), "");
    EXPECT_EQ(thinned.model->named_parameters()["layer1.0.conv1.weight"].size(0), width) << file;
    thinned.model->eval();
    EXPECT_LE((thinned.model->forward(x) - expected).abs().max().item<double>(),
              1e-5 * expected.abs().max().item<double>())
        << file;
  }
  if (!auto_error.empty()) {
    EXPECT_NE(
        auto_error.find("every zeroed channel group is kept to round widths (--round-to auto)"),
        std::string::npos)
        << auto_error;
    EXPECT_FALSE(fs::exists(tmp / "auto.ckpt"));
  } else {
    auto timed = options::load_tool_model("", {}, (tmp / "auto.ckpt").string(), "");
    const auto w = timed.model->named_parameters()["layer1.0.conv1.weight"].size(0);
    EXPECT_TRUE(w == 6 || w == 8) << w;
    timed.model->eval();
    EXPECT_LE((timed.model->forward(x) - expected).abs().max().item<double>(),
              1e-5 * expected.abs().max().item<double>());
  }
  for (const char* bad : {"0", "auto8", "-4", "8x"})
    EXPECT_THROW(thin(bad, "bad.ckpt"), InputError) << bad;
  EXPECT_FALSE(fs::exists(tmp / "bad.ckpt"));
}

TEST(ToolEarlyExit, CalibratesMeasuresAndWritesTheCheckpointAndSegments) {
  test::TempDir tmp;
  const auto dir = tmp.path();
  auto model = make("resnet20_cifar_earlyexit");
  CheckpointMeta meta;
  meta.optform = "classify";
  meta.model = "resnet20_cifar_earlyexit";
  meta.model_options = model->options_json();
  save_checkpoint(dir / "ee.ckpt", meta, {model.get(), nullptr, nullptr, nullptr});
  testing::internal::CaptureStdout();
  ASSERT_EQ(run_tool_command({"early-exit",
                              "--checkpoint",
                              (dir / "ee.ckpt").string(),
                              "--data",
                              "synthetic",
                              "--max-samples",
                              "96",
                              "--batch-size",
                              "32",
                              "--repeats",
                              "1",
                              "--target-accuracy-drop",
                              "2",
                              "--out",
                              (dir / "out").string(),
                              "--save",
                              (dir / "cal.ckpt").string(),
                              "--export",
                              (dir / "segments").string(),
                              "--threads",
                              "1"}),
            0);
  const std::string printed = testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("layer1.2.relu2"), std::string::npos) << printed;
  const auto report = nlohmann::json::parse(read_text_file(dir / "out" / "early_exit.json"));
  EXPECT_EQ(report["disagreements"], 0);
  EXPECT_EQ(report["report_set"]["samples"], 96);
  EXPECT_EQ(report["exits"].size(), 2u);
  EXPECT_NEAR(
      report["exits"][0]["share_pct"].get<double>() + report["exits"][1]["share_pct"].get<double>(),
      100.0, 1e-9);
  for (const char* f : {"early_exit.csv", "curve.csv", "curve.svg", "curve.png"})
    EXPECT_TRUE(fs::exists(dir / "out" / f)) << f;
  const auto saved = Checkpoint::load((dir / "cal.ckpt").string());
  ASSERT_TRUE(saved.meta().extra.contains("early_exit"));
  EXPECT_EQ(saved.meta().extra["early_exit"]["criterion"], "max-softmax");
  EXPECT_EQ(saved.meta().extra["early_exit"]["thresholds"].size(), 1u);
  const auto manifest = nlohmann::json::parse(read_text_file(dir / "segments" / "manifest.json"));
  ASSERT_EQ(manifest["segments"].size(), 2u);
  EXPECT_TRUE(fs::exists(dir / "segments" / "segment0.onnx"));
  EXPECT_EQ(manifest["segments"][0]["exit"]["threshold"],
            saved.meta().extra["early_exit"]["thresholds"][0]);
  // A model without exits is refused in one line.
  auto plain = make("resnet20_cifar");
  meta.model = "resnet20_cifar";
  meta.model_options = plain->options_json();
  save_checkpoint(dir / "plain.ckpt", meta, {plain.get(), nullptr, nullptr, nullptr});
  EXPECT_THROW(run_tool_command({"early-exit", "--checkpoint", (dir / "plain.ckpt").string(),
                                 "--data", "synthetic", "--max-samples", "8"}),
               InputError);
}

TEST(ToolPartition, PlansWritesTheChartAndExportsStages) {
  const auto dir = fs::temp_directory_path() / ("igb_tool_partition_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto op_count = graph_of(make("resnet20_cifar"), "resnet20_cifar").ops().size();
  // A cost file as another machine would write it, and a devices file naming it.
  EXPECT_THROW(run_tool_command({"partition", "--model", "resnet20_cifar"}), InputError);
  ASSERT_EQ(run_tool_command({"partition", "--model", "resnet20_cifar", "--write-costs",
                              (dir / "edge.json").string(), "--threads", "1"}),
            0);
  write_text_atomically(dir / "d.yaml",
                        "devices:\n  - {name: camera, speed: 0.1}\n"
                        "  - {name: edge, costs: edge.json}\n  - {name: cloud, speed: 10}\n"
                        "links:\n  - {bandwidth_mb_s: 6.3, latency_ms: 1}\n"
                        "  - {bandwidth_mb_s: 0.68, latency_ms: 10}\n");
  const std::string devices = (dir / "d.yaml").string();
  ASSERT_EQ(run_tool_command({"partition", "--model", "resnet20_cifar", "--devices", devices,
                              "--objective", "throughput", "--cache-dir", (dir / "cache").string(),
                              "--out", (dir / "out").string(), "--export",
                              (dir / "stages").string(), "--frames", "12", "--threads", "1"}),
            0);
  const auto plan = nlohmann::json::parse(read_text_file(dir / "out" / "plan.json"));
  ASSERT_EQ(plan["plans"].size(), 5u);
  const double best = plan["plans"][0]["bottleneck_ms"].get<double>();
  for (const auto& p : plan["plans"])
    EXPECT_GE(p["bottleneck_ms"].get<double>(), best * (1 - 1e-9)) << p["method"];
  EXPECT_NEAR(plan["simulation"]["throughput_fps"].get<double>(), 1000.0 / best,
              1e-6 * 1000 / best);
  EXPECT_TRUE(fs::exists(dir / "out" / "gantt.png"));
  EXPECT_TRUE(fs::exists(dir / "out" / "plan.csv"));
  EXPECT_FALSE(fs::is_empty(dir / "cache"));
  const auto manifest = nlohmann::json::parse(read_text_file(dir / "stages" / "manifest.json"));
  int ops = 0;
  for (const auto& s : manifest["stages"]) {
    ops += s["ops"].get<int>();
    EXPECT_TRUE(fs::exists(dir / "stages" / s["file"].get<std::string>()));
  }
  EXPECT_EQ(ops, static_cast<int>(op_count));
  // The verifier agrees on a small graph. The edge's cost file is ResNet-20's: refused for FSRCNN.
  EXPECT_THROW(run_tool_command({"partition", "--model", "fsrcnn", "--devices", devices}),
               InputError);
  write_text_atomically(dir / "measured.yaml",
                        "devices:\n  - {name: camera, speed: 0.1}\n  - {name: edge}\n"
                        "  - {name: cloud, speed: 10}\nlinks:\n  - {bandwidth_mb_s: 6.3}\n"
                        "  - {bandwidth_mb_s: 0.68, latency_ms: 10}\n");
  testing::internal::CaptureStdout();
  ASSERT_EQ(run_tool_command({"partition", "--model", "fsrcnn", "--devices",
                              (dir / "measured.yaml").string(), "--verify", "--cache-dir",
                              (dir / "cache").string(), "--threads", "1"}),
            0);
  const std::string verified = testing::internal::GetCapturedStdout();
  EXPECT_NE(verified.find("gap 0.000000%"), std::string::npos) << verified;
  // Mistakes are one line each.
  EXPECT_THROW(run_tool_command({"partition", "--model", "resnet20_cifar", "--devices", devices,
                                 "--mode", "diff", "--cache-dir", (dir / "cache").string()}),
               InputError);
  // A value --objective does not take is the option parser's error, naming the flag.
  EXPECT_THROW(run_tool_command({"partition", "--model", "resnet20_cifar", "--devices", devices,
                                 "--objective", "fast"}),
               CLI::ValidationError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace igb::deploy
