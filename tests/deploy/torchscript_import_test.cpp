// Models brought as TorchScript: files written by Debian's python3-torch (the same 1.13.1 build as
// LibTorch), scripted and traced, of three zoo twins: a plain CNN, a residual and a concat network.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "compress/thinning.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/thinning_recipe.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_runtime.h"
#include "deploy/torchscript/torchscript_export.h"
#include "models/model.h"
#include "tests/apps/run_support.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"

namespace igb {
namespace {

namespace fs = std::filesystem;

/// Debian's interpreter, which python3-torch serves (another python3 may come first on PATH).
constexpr const char* kDebianPython = "/usr/bin/python3";

struct Twin {
  const char* file;  // the script's name for it
  const char* zoo;
  nlohmann::json options;
};

const std::vector<Twin>& twins() {
  static const std::vector<Twin> all{
      {"simplenet", "simplenet_cifar", nlohmann::json::object()},
      {"resnet20", "resnet20_cifar", {{"shortcut", "conv"}}},
      {"densenet10", "densenet_cifar", {{"depth", 10}}},
  };
  return all;
}

/// The zoo twin with the weights the files were written with (seed 7).
models::Model zoo_twin(const Twin& t) {
  torch::manual_seed(7);
  return models::create_model(t.zoo, t.options);
}

/// Writes each zoo twin's tensors as .npy, then the TorchScript files from them, once.
class TorchScriptImport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models::register_builtin_models();
    dir_ = fs::temp_directory_path() / ("igb_torchscript_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    for (const auto& t : twins()) {
      auto m = zoo_twin(t);
      const auto folder = dir_ / "weights" / t.file;
      fs::create_directories(folder);
      for (const auto& p : m->named_parameters()) write_npy(folder / (p.key() + ".npy"), p.value());
      for (const auto& b : m->named_buffers()) write_npy(folder / (b.key() + ".npy"), b.value());
    }
    const auto r = test::shell(std::string(kDebianPython) + " " + IGB_SOURCE_DIR +
                               "/tests/fixtures/torchscript/make_models.py " + dir_.string() + " " +
                               (dir_ / "weights").string());
    made_ = r.code == 0;
    python_output_ = r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    ASSERT_TRUE(made_) << "python3-torch could not write the TorchScript files "
                          "(scripts/setup.sh installs it): "
                       << python_output_;
  }
  static std::string file(const std::string& twin, const std::string& kind) {
    return (dir_ / (twin + "_" + kind + ".pt")).string();
  }

  static fs::path dir_;
  static bool made_;
  static std::string python_output_;
};

fs::path TorchScriptImport::dir_;
bool TorchScriptImport::made_ = false;
std::string TorchScriptImport::python_output_;

TEST_F(TorchScriptImport, NamesShapesMacsAndOutputsEqualTheZooTwins) {
  for (const auto& t : twins()) {
    auto zoo = zoo_twin(t);
    zoo->eval();
    const auto zoo_graph = tools::graph_of(zoo, t.zoo);
    const auto x = read_npy(dir_ / (std::string(t.file) + "_input.npy"));
    const auto python_y = read_npy(dir_ / (std::string(t.file) + "_output.npy"));
    torch::NoGradGuard no_grad;
    const auto zoo_y = zoo->forward(x);
    for (const std::string kind : {"script", "trace"}) {
      SCOPED_TRACE(std::string(t.file) + " " + kind);
      auto m = models::create_model("torchscript:" + file(t.file, kind), {});
      m->eval();
      const auto mine = m->named_parameters(), theirs = zoo->named_parameters();
      ASSERT_EQ(mine.size(), theirs.size());
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_EQ(mine[i].key(), theirs[i].key());
        EXPECT_EQ(mine[i].value().sizes(), theirs[i].value().sizes()) << mine[i].key();
      }
      EXPECT_EQ(m->named_buffers().size(), zoo->named_buffers().size());
      const auto graph = tools::graph_of(m, t.file);
      EXPECT_EQ(graph.total_macs(), zoo_graph.total_macs());
      EXPECT_EQ(graph.ops().size(), zoo_graph.ops().size());
      EXPECT_EQ(m->options_json().at("family"), "classify");
      const auto y = m->forward(x);
      EXPECT_LE((y - zoo_y).abs().max().item<double>(), 1e-5);
      EXPECT_LE((y - python_y).abs().max().item<double>(), 1e-4);
    }
  }
}

/// The weight sparsity table of a run's checkpoint, from its first weight row on (the title names
/// the model).
std::string sparsity_rows(const fs::path& run) {
  auto r = test::run_app("igb-tools sparsity --checkpoint " + (run / "checkpoint.ckpt").string());
  EXPECT_EQ(r.code, 0) << r.output;
  const auto at = r.output.find("conv1.weight");
  return at == std::string::npos ? r.output : r.output.substr(at);
}

TEST_F(TorchScriptImport, DistillerSchedulesRunUnchangedAndGiveTheZooTwinsSparsityAndShapes) {
  struct Case {
    const Twin& twin;
    const char* schedule;
    const char* zoo_args;
  };
  const Case cases[] = {
      {twins()[0], "schedules/classify/simplenet_agp.yaml", ""},
      {twins()[1], "schedules/distiller/resnet20_cifar_filters_agp.yaml",
       "--model-arg shortcut=conv"},
      {twins()[2], "tests/fixtures/torchscript/densenet10_filters.yaml", "--model-arg depth=10"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.schedule);
    const std::string common = std::string(" --synthetic-train 32 ") +
                               "--synthetic-val 16 --batch-size 8 --threads 1 " +
                               "--seed 7 --compress " + IGB_SOURCE_DIR + "/" + c.schedule;
    const auto zoo_run = dir_ / "runs" / (std::string(c.twin.file) + "_zoo");
    const auto imported_run = dir_ / "runs" / (std::string(c.twin.file) + "_imported");
    auto r = test::run_app("igb-train --optform=classify --model " + std::string(c.twin.zoo) + " " +
                           c.zoo_args + common + " --epochs 6 --out " + zoo_run.string());
    ASSERT_EQ(r.code, 0) << r.output;
    r = test::run_app(
        "igb-train --optform=classify --model torchscript:" + file(c.twin.file, "script") + common +
        " --epochs 6 --out " + imported_run.string());
    ASSERT_EQ(r.code, 0) << r.output;
    // The same weights, data and schedule: the same masks, thinned shapes and trained weights.
    const auto zoo_rows = sparsity_rows(zoo_run);
    EXPECT_EQ(sparsity_rows(imported_run), zoo_rows);
    EXPECT_NE(zoo_rows.find("0.00 |"), std::string::npos);
    // The imported run's checkpoint rebuilds its model alone (the file, by path and CRC-32C).
    r = test::run_app("igb-test --optform=classify --data synthetic --threads 1 --checkpoint " +
                      (imported_run / "checkpoint.ckpt").string());
    EXPECT_EQ(r.code, 0) << r.output;
    // And --resume continues it.
    r = test::run_app("igb-train --optform=classify --resume " +
                      (imported_run / "checkpoint.ckpt").string() + common + " --epochs 7 --out " +
                      (imported_run.string() + "_resumed"));
    EXPECT_EQ(r.code, 0) << r.output;
  }
  // densenet10's first transition lost half its 18 filters, and through dense2's concatenation
  // the second transition the same input channels (30 -> 21 with dense2's own).
  const auto dense = sparsity_rows(dir_ / "runs" / "densenet10_imported");
  EXPECT_TRUE(std::regex_search(dense, std::regex("trans1\\.conv\\.weight +\\| 9x36x1x1")));
  EXPECT_TRUE(std::regex_search(dense, std::regex("trans2\\.conv\\.weight +\\| 15x21x1x1")));
  // resnet20's filter pruning thinned layer2 to half its filters, as the zoo model's run did.
  EXPECT_TRUE(std::regex_search(sparsity_rows(dir_ / "runs" / "resnet20_imported"),
                                std::regex("layer2\\.0\\.conv1\\.weight +\\| 16x16x3x3")));
}

/// The line of `output` that starts with `prefix` ("" when none).
std::string line_of(const std::string& output, const std::string& prefix) {
  for (const auto& line : test::RunResult{0, output}.lines())
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

TEST_F(TorchScriptImport, QuantizationAwareTrainingWrapsTheZooTwinsLayersAndExportsInt8) {
  std::string wrapped[2], exported[2];
  for (int imported = 0; imported < 2; ++imported) {
    const auto run = dir_ / "runs" / (imported ? "qat_imported" : "qat_zoo");
    const std::string model = imported ? "torchscript:" + file("resnet20", "trace")
                                       : "resnet20_cifar --model-arg shortcut=conv";
    auto r = test::run_app("igb-train --optform=classify --model " + model +
                           " --synthetic-train 32 --synthetic-val 16 --batch-size 8 --threads 1 "
                           "--seed 7 --epochs 2 --compress " +
                           IGB_SOURCE_DIR + "/schedules/classify/resnet20_int8_qat.yaml --out " +
                           run.string());
    ASSERT_EQ(r.code, 0) << r.output;
    wrapped[imported] = line_of(r.output, "quantizer qat_quantizer");
    r = test::run_app("igb-tools export-onnx --int8-qdq --checkpoint " +
                      (run / "checkpoint.ckpt").string() + " --out " + (run / "m.onnx").string());
    ASSERT_EQ(r.code, 0) << r.output;
    exported[imported] = line_of(r.output, "  precision int8");
  }
  // Every conv weight, every ReLU module and the model input, as for the zoo model.
  EXPECT_NE(wrapped[0].find("layer3.2.relu2 activations 8 bits"), std::string::npos) << wrapped[0];
  EXPECT_EQ(wrapped[1], wrapped[0]);
  EXPECT_NE(exported[0].find("activation and"), std::string::npos) << exported[0];
  EXPECT_EQ(exported[1], exported[0]);
}

TEST_F(TorchScriptImport, ThinningAnImportedModelKeepsTheMaskedOutput) {
  // The functional model's stem is a weight F.conv2d reads: thinning slices it, and the module's
  // TorchScript code runs on the smaller weight.
  const std::map<std::string, std::pair<std::string, std::string>> zeroed{
      {"resnet20", {"layer1.0.conv1", "layer1.0.bn1"}},
      {"densenet10", {"dense1.0.conv1", "dense1.0.bn2"}},
      {"functional", {"stem", "bn"}}};
  const std::map<std::string, int64_t> left{
      {"resnet20", 14}, {"densenet10", 46}, {"functional", 6}};
  for (const auto& [twin, layers] : zeroed) {
    SCOPED_TRACE(twin);
    auto m = models::create_model(
        "torchscript:" + file(twin, twin == "functional" ? "script" : "trace"), {});
    m->eval();
    // Filters 1 and 4 of the conv (and their BN), so the channels are zero after it.
    const auto& [conv, bn] = layers;
    {
      torch::NoGradGuard no_grad;
      auto params = m->named_parameters();
      for (int64_t c : {1, 4}) {
        params[conv + ".weight"][c].zero_();
        params[bn + ".weight"][c].zero_();
        params[bn + ".bias"][c].zero_();
      }
    }
    torch::manual_seed(3);
    const auto x = torch::randn({2, 3, 32, 32});
    torch::NoGradGuard no_grad;
    const auto masked = m->forward(x);
    const auto plan =
        compress::plan_thinning(*m, tools::graph_of(m, twin), compress::ThinningKind::kFilters);
    ASSERT_FALSE(plan.empty());
    apply_thinning_recipe(*m, plan.recipe, twin);
    EXPECT_EQ(m->named_parameters()[conv + ".weight"].size(0), left.at(twin));
    EXPECT_LE((m->forward(x) - masked).abs().max().item<double>(), 1e-5);
  }
}

TEST_F(TorchScriptImport, OnnxExportOfAnImportedModelMatchesOnnxRuntime) {
  auto m = models::create_model("torchscript:" + file("densenet10", "script"), {});
  m->eval();
  const auto graph = tools::graph_of(m, "densenet10");
  const auto onnx = dir_ / "densenet10.onnx";
  deploy::export_onnx(*m, graph, deploy::OnnxExportOptions().dynamic_batch(true), onnx);
  torch::manual_seed(5);
  const auto x = torch::randn({2, 3, 32, 32});
  at::Tensor ort;
  try {
    ort = deploy::OnnxRuntimeRunner(onnx, dir_).run(x);
  } catch (const InputError& e) {
    FAIL() << e.what();
  }
  torch::NoGradGuard no_grad;
  EXPECT_LE((m->forward(x) - ort).abs().max().item<double>(), 1e-4);
}

/// Exports `m` as TorchScript, runs the file in PyTorch on `x` and reads it back with igb: both
/// must give m's output, and PyTorch must list m's parameter names.
void check_export_round_trip(const models::Model& m, const std::string& name, const fs::path& dir,
                             const at::Tensor& x) {
  SCOPED_TRACE(name);
  m->eval();
  const auto pt = dir / (name + "_exported.pt");
  deploy::export_torchscript(
      *m, m->input_shape(), [&](const at::Tensor& in) { return m->forward(in); }, pt);
  torch::NoGradGuard no_grad;
  const auto want = m->forward(x);
  write_npy(dir / (name + "_x.npy"), x);
  const auto r =
      test::shell(std::string(kDebianPython) + " " + IGB_SOURCE_DIR +
                  "/tests/fixtures/torchscript/run_model.py " + pt.string() + " " +
                  (dir / (name + "_x.npy")).string() + " " + (dir / (name + "_y.npy")).string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LE((read_npy(dir / (name + "_y.npy")) - want).abs().max().item<double>(), 1e-5);
  std::string names;
  for (const auto& p : m->named_parameters()) names += p.key() + "\n";
  EXPECT_EQ(r.output, names);
  auto back = models::create_model("torchscript:" + pt.string(), {});
  back->eval();
  EXPECT_LE((back->forward(x) - want).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(models::count_parameters(*back), models::count_parameters(*m));
}

TEST_F(TorchScriptImport, ExportedTorchScriptLoadsInPythonWithTheSameOutputs) {
  torch::manual_seed(11);
  const auto x = torch::randn({2, 3, 32, 32});
  // A zoo model (with the zero-padded shortcuts), and an imported one after thinning.
  check_export_round_trip(tools::make("resnet20_cifar"), "zoo_resnet20", dir_, x);
  auto m = models::create_model("torchscript:" + file("resnet20", "script"), {});
  {
    torch::NoGradGuard no_grad;
    auto params = m->named_parameters();
    for (const char* p : {"layer2.1.conv1.weight", "layer2.1.bn1.weight", "layer2.1.bn1.bias"})
      params[p].narrow(0, 3, 5).zero_();
  }
  m->eval();
  const auto plan =
      compress::plan_thinning(*m, tools::graph_of(m, "resnet20"), compress::ThinningKind::kFilters);
  apply_thinning_recipe(*m, plan.recipe, "resnet20");
  ASSERT_EQ(m->named_parameters()["layer2.1.conv1.weight"].size(0), 27);
  check_export_round_trip(m, "thinned_resnet20", dir_, x);
}

TEST_F(TorchScriptImport, ASuperResolutionFileTrainsUnderTheSrOptform) {
  const auto pt = file("fsrcnn", "trace");
  auto m = models::create_model("torchscript:" + pt, {{"channels", 1}});
  EXPECT_EQ(m->options_json().at("family"), "sr");
  EXPECT_EQ(m->options_json().at("scale"), 3);
  const auto graph = tools::graph_of(m, "fsrcnn");
  EXPECT_EQ(graph.op("last_part").type, "ConvTranspose");
  EXPECT_EQ(graph.op("first_part.1").type, "PReLU");
  const auto run = dir_ / "runs" / "fsrcnn";
  auto r = test::run_app(
      "igb-train --optform=sr --data synthetic --upscale 3 --channels y --epochs 1 "
      "--max-batches 2 "
      "--threads 1 --model torchscript:" +
      pt + " --compress " + IGB_SOURCE_DIR + "/tests/fixtures/torchscript/" +
      "fsrcnn_agp.yaml --out " + run.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(sparsity_rows(run).find("mid_part.2.weight"), std::string::npos);
}

TEST_F(TorchScriptImport, BadFilesAndInputsAreOneLineInputErrors) {
  const auto not_ts = dir_ / "not_torchscript.pt";
  std::ofstream(not_ts) << "def forward(x): return x\n";
  auto r = test::run_app("igb-tools macs --model torchscript:" + not_ts.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("not a TorchScript archive"), std::string::npos) << r.output;
  EXPECT_EQ(r.lines().size(), 1u) << r.output;
  r = test::run_app("igb-tools macs --model torchscript:" + (dir_ / "missing.pt").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("no such file"), std::string::npos) << r.output;
  // The files take 3 channels: a 1-channel input is named with the option that changes it.
  r = test::run_app("igb-tools macs --model torchscript:" + file("resnet20", "script") +
                    " --model-arg channels=1");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("its forward fails on a 1x1x32x32 input"), std::string::npos) << r.output;
  EXPECT_EQ(r.lines().size(), 1u) << r.output;
  EXPECT_EQ(r.output.find("report a bug"), std::string::npos) << r.output;
  // A file that changed after a run recorded its CRC-32C is refused.
  const auto copy = dir_ / "copy.pt";
  fs::copy_file(file("simplenet", "trace"), copy);
  r = test::run_app("igb-tools macs --model torchscript:" + copy.string() +
                    " --model-arg crc32c=00000000");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("changed since"), std::string::npos) << r.output;
  // A forward of two inputs.
  r = test::run_app("igb-tools macs --model torchscript:" + file("two_inputs", "script"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.output.find("forward takes 2 inputs (x, y); igb gives a model one batch of images"),
            std::string::npos)
      << r.output;
  // A classifier file is not a super-resolution model.
  r = test::run_app("igb-train --optform=sr --epochs 1 --model torchscript:" +
                    file("simplenet", "trace") + " --out " + (dir_ / "sr_run").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.lines().size(), 1u) << r.output;
}

}  // namespace
}  // namespace igb
