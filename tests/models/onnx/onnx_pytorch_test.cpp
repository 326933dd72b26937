// ONNX files written by Debian's python3-torch (tests/fixtures/onnx/make_models.py): imported
// with PyTorch's names, computing PyTorch's outputs, trained under a filter-pruning schedule with
// thinning through a residual add, and exported back for onnxruntime.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "core/npy.h"
#include "core/train_mode_guard.h"
#include "deploy/onnx/onnx_runtime.h"
#include "models/model.h"
#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace igb {
namespace {

namespace fs = std::filesystem;

/// Debian's interpreter, which python3-torch serves (another python3 may come first on PATH).
constexpr const char* kDebianPython = "/usr/bin/python3";

class OnnxFromPyTorch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models::register_builtin_models();
    dir_ = fs::temp_directory_path() / ("igb_onnx_pytorch_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const auto r = test::shell(std::string(kDebianPython) + " " + IGB_SOURCE_DIR +
                               "/tests/fixtures/onnx/make_models.py " + dir_.string());
    made_ = r.code == 0;
    python_output_ = r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    ASSERT_TRUE(made_) << "python3-torch could not write the ONNX files (scripts/setup.sh "
                          "installs it): "
                       << python_output_;
  }
  static std::string file(const std::string& name) { return (dir_ / (name + ".onnx")).string(); }
  static at::Tensor npy(const std::string& name) { return read_npy(dir_ / (name + ".npy")); }

  static fs::path dir_;
  static bool made_;
  static std::string python_output_;
};
fs::path OnnxFromPyTorch::dir_;
bool OnnxFromPyTorch::made_ = false;
std::string OnnxFromPyTorch::python_output_;

double relative_difference(const at::Tensor& got, const at::Tensor& want) {
  if (got.sizes() != want.sizes()) return 1e30;
  return (got - want).abs().max().item<double>() / want.abs().max().item<double>();
}

TEST_F(OnnxFromPyTorch, ImportsWithPyTorchsNamesAndComputesItsOutputs) {
  struct Case {
    const char* name;
    nlohmann::json args;
    const char* family;
  };
  const Case cases[] = {{"small_train", nlohmann::json::object(), "classify"},
                        {"small_eval", nlohmann::json::object(), "classify"},
                        {"sr_x3", {{"input_size", 24}}, "sr"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto model = models::create_model(std::string("onnx:") + file(c.name), c.args);
    EXPECT_EQ(model->options_json().value("family", ""), c.family);
    TrainModeGuard eval(*model, false);
    torch::NoGradGuard no_grad;
    const auto x = npy(std::string(c.name) + "_input");
    const auto y = model->forward(x);
    EXPECT_LE(relative_difference(y, npy(std::string(c.name) + "_output")), 1e-4);
    // A graph exported for training computes its batch norms on the batch's statistics in
    // onnxruntime; imported, they are the model's batch norms, on running statistics in
    // evaluation (what PyTorch's output above is).
    if (std::string(c.name) != "small_train")
      EXPECT_LE(relative_difference(y, deploy::OnnxRuntimeRunner(file(c.name), dir_).run(x)), 1e-4);
  }
  // Exported for training, the batch norms and PyTorch's names stay; for inference, the exporter
  // folds each batch norm into its conv and names the weight itself, and the layer takes its
  // module scope.
  auto train = models::create_model("onnx:" + file("small_train"), {});
  const auto buffers = train->named_buffers();
  EXPECT_TRUE(buffers.contains("bn2.running_var"));
  EXPECT_TRUE(train->named_parameters().contains("conv2.weight"));
  auto eval = models::create_model("onnx:" + file("small_eval"), {});
  std::vector<std::string> names;
  for (const auto& p : eval->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names,
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "conv3.weight", "conv3.bias", "fc.weight", "fc.bias"}));
  auto sr = models::create_model("onnx:" + file("sr_x3"), {{"input_size", 24}});
  EXPECT_EQ(sr->options_json().value("scale", 0), 3);
  EXPECT_TRUE(sr->named_parameters().contains("act1.weight")) << "PReLU slopes";
}

TEST_F(OnnxFromPyTorch, SummaryNamesWhereEachTensorOfTheFileWent) {
  const auto json = dir_ / "summary.json";
  const auto r = test::run_app("igb-tools summary --model onnx:" + file("small_eval") + " --json " +
                               json.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("Imported from " + file("small_eval")), std::string::npos) << r.output;
  const auto doc = nlohmann::json::parse(std::ifstream(json));
  ASSERT_EQ(doc["tensors"].size(), 8u);
  EXPECT_EQ(doc["tensors"][0]["name"], "conv1.weight");
  EXPECT_TRUE(std::regex_match(doc["tensors"][0]["file_name"].get<std::string>(),
                               std::regex("onnx::Conv_[0-9]+")));
  EXPECT_EQ(doc["tensors"][6]["name"], "fc.weight");
  EXPECT_EQ(doc["tensors"][6]["file_name"], "fc.weight");
  EXPECT_EQ(doc["total_params"], 7738);
}

TEST_F(OnnxFromPyTorch, TrainsUnderAFilterScheduleWithThinningAndExportsBackForOnnxRuntime) {
  const auto run = dir_ / "run";
  auto r = test::run_app("igb-train --optform=classify --model onnx:" + file("small_train") +
                         " --synthetic-train 32 --synthetic-val 16 --batch-size 8 --threads 1 "
                         "--seed 7 --epochs 3 --compress " +
                         IGB_SOURCE_DIR + "/tests/fixtures/onnx/small_filters.yaml --out " +
                         run.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto summary = nlohmann::json::parse(std::ifstream(run / "summary.json"));
  ASSERT_EQ(summary["thinning"].size(), 1u);
  // conv1 and conv2 meet at the add and lose 8 of their 16 filters together, conv3 16 of 32.
  EXPECT_EQ(summary["thinning"][0]["params_before"], 7866);
  EXPECT_EQ(summary["thinning"][0]["params_after"], 2210);
  // The checkpoint rebuilds the thin model from the file alone; exported back, onnxruntime
  // computes what igb does.
  const auto onnx = dir_ / "thin.onnx";
  r = test::run_app("igb-tools export-onnx --checkpoint " + (run / "checkpoint.ckpt").string() +
                    " --out " + onnx.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto x = npy("small_train_input").slice(0, 0, 1);
  write_npy(dir_ / "x.npy", x);
  r = test::run_app("igb-tools run --runtime eager --checkpoint " +
                    (run / "checkpoint.ckpt").string() + " --input " + (dir_ / "x.npy").string() +
                    " --output " + (dir_ / "y.npy").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto ours = read_npy(dir_ / "y.npy");
  const auto ort = deploy::OnnxRuntimeRunner(onnx, dir_).run(x);
  EXPECT_LE(relative_difference(ort, ours), 1e-4);
  // And igb reads back what export-onnx wrote: the thin model, its names and outputs.
  auto back = models::create_model("onnx:" + onnx.string(), {});
  EXPECT_EQ(back->named_parameters()["conv1.weight"].size(0), 8);
  TrainModeGuard eval(*back, false);
  torch::NoGradGuard no_grad;
  EXPECT_LE(relative_difference(back->forward(x), ours), 1e-5);
}

TEST_F(OnnxFromPyTorch, SuperResolutionFilesTrainOnTheFamilysPatchesAndQuantizationAwareTraining) {
  // The x3 file leaves height and width open: under --optform=sr it takes the family's patches.
  const auto sr_run = dir_ / "sr_run";
  auto r = test::run_app(
      "igb-train --optform=sr --data synthetic --upscale 3 --channels y --epochs 1 "
      "--max-batches 2 --threads 1 --model onnx:" +
      file("sr_x3") + " --out " + sr_run.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto sr = nlohmann::json::parse(std::ifstream(sr_run / "summary.json"));
  // 4,041 weights and biases and the 2 x 16 PReLU slopes, which PyTorch's exporter had shared.
  EXPECT_EQ(sr["params"], 4073);
  EXPECT_TRUE(std::isfinite(sr["psnr"].get<double>()));
  // The checkpoint rebuilds the model from the file; it scores whole images of any size.
  r = test::run_app("igb-test --optform=sr --data synthetic --threads 1 --checkpoint " +
                    (sr_run / "checkpoint.ckpt").string());
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("PSNR gain over bicubic"), std::string::npos) << r.output;
  // Quantization-aware training wraps the imported layers and activations as a zoo model's.
  const auto qat_run = dir_ / "qat_run";
  r = test::run_app("igb-train --optform=classify --model onnx:" + file("small_eval") +
                    " --synthetic-train 32 --synthetic-val 16 --batch-size 8 --threads 1 "
                    "--seed 7 --epochs 1 --compress " +
                    IGB_SOURCE_DIR + "/schedules/classify/resnet20_int8_qat.yaml --out " +
                    qat_run.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("conv1.weight 8 bits"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fc.weight 8 bits"), std::string::npos) << r.output;
  const auto onnx = dir_ / "qat.onnx";
  r = test::run_app("igb-tools export-onnx --int8-qdq --checkpoint " +
                    (qat_run / "checkpoint.ckpt").string() + " --out " + onnx.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("4 weight Q/DQ pairs"), std::string::npos) << r.output;
}

/// torchvision's classifiers exported by tests/fixtures/onnx/make_torchvision.py, once.
class TorchvisionOnnx : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    models::register_builtin_models();
    dir_ = fs::temp_directory_path() / ("igb_onnx_torchvision_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    const auto r = test::shell(std::string(kDebianPython) + " " + IGB_SOURCE_DIR +
                               "/tests/fixtures/onnx/make_torchvision.py " + dir_.string());
    made_ = r.code == 0;
    python_output_ = r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  void SetUp() override {
    ASSERT_TRUE(made_) << "python3-torch and python3-torchvision could not write the ONNX files "
                          "(scripts/setup.sh installs them): "
                       << python_output_;
  }
  static fs::path dir_;
  static bool made_;
  static std::string python_output_;
};
fs::path TorchvisionOnnx::dir_;
bool TorchvisionOnnx::made_ = false;
std::string TorchvisionOnnx::python_output_;

TEST_F(TorchvisionOnnx, ClassifiersOfOpsets9To17ComputeWhatOnnxRuntimeAndPyTorchDo) {
  for (const char* name :
       {"mobilenet_v3_small", "mobilenet_v3_large", "shufflenet_v2_x0_5", "squeezenet1_1",
        "regnet_x_400mf", "efficientnet_b0", "densenet121", "resnet18"}) {
    SCOPED_TRACE(name);
    const auto onnx = dir_ / (std::string(name) + ".onnx");
    auto model = models::create_model("onnx:" + onnx.string(), {});
    EXPECT_EQ(model->options_json().value("num_classes", 0), 1000);
    const auto x = read_npy(dir_ / (std::string(name) + "_input.npy"));
    TrainModeGuard eval(*model, false);
    at::Tensor y;
    {
      torch::NoGradGuard no_grad;
      y = model->forward(x);
    }
    EXPECT_LE(relative_difference(y, deploy::OnnxRuntimeRunner(onnx, dir_).run(x)), 1e-4);
    EXPECT_LE(relative_difference(y, read_npy(dir_ / (std::string(name) + "_output.npy"))), 1e-4);
  }
}

TEST_F(TorchvisionOnnx, ResNet18sMacsAreTheZooTwinsAndThePublishedCount) {
  int64_t macs[2] = {0, 0};
  const std::string models[2] = {"onnx:" + (dir_ / "resnet18.onnx").string(), "resnet18"};
  for (int i = 0; i < 2; ++i) {
    const auto json = dir_ / ("macs" + std::to_string(i) + ".json");
    const auto r =
        test::run_app("igb-tools macs --model " + models[i] + " --json " + json.string());
    ASSERT_EQ(r.code, 0) << r.output;
    macs[i] = nlohmann::json::parse(std::ifstream(json))["total_macs"].get<int64_t>();
  }
  EXPECT_EQ(macs[0], 1814073344);
  EXPECT_EQ(macs[1], macs[0]);
}

}  // namespace
}  // namespace igb
