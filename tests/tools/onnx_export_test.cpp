#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/npy.h"
#include "tests/tools/tools_support.h"
#include "tools/export/onnx_export.h"
#include "tools/graph/summary_graph.h"

namespace igb::tools {

namespace {

namespace fs = std::filesystem;

/// A fresh folder per test under the system temp folder.
fs::path onnx_test_folder(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("igb_onnx_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

onnx::ModelProto load_onnx_model(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromIstream(&in)) << path;
  return m;
}

/// Runs `model` on `x` with onnxruntime (scripts/ort_run.js); fails the test with the reason when
/// Node.js or onnxruntime-node is missing or the run fails.
at::Tensor onnx_runtime_forward(const fs::path& model, const at::Tensor& x, const fs::path& dir) {
  const fs::path ort =
      fs::path(IGB_SOURCE_DIR) / ".cache/onnxruntime/node_modules/onnxruntime-node";
  if (std::system("command -v node > /dev/null 2>&1") != 0) {
    ADD_FAILURE() << "node is not installed: run scripts/install_onnxruntime.sh";
    return {};
  }
  if (!fs::exists(ort)) {
    ADD_FAILURE() << "onnxruntime-node is not installed in " << ort
                  << ": run scripts/install_onnxruntime.sh";
    return {};
  }
  write_npy(dir / "x.npy", x);
  const std::string cmd = "node " + std::string(IGB_SOURCE_DIR) + "/scripts/ort_run.js " +
                          model.string() + " --input input=" + (dir / "x.npy").string() +
                          " --output-dir " + (dir / "ort").string() + " 2>&1";
  std::string log;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) log += buf;
  const int rc = p ? ::pclose(p) : -1;
  if (rc != 0) {
    ADD_FAILURE() << cmd << " failed: " << log;
    return {};
  }
  return read_npy(dir / "ort" / "output.npy");
}

/// Max |a - b| over max |a|.
struct OnnxDiff {
  double max_abs = 0, scale = 0;
};

OnnxDiff onnx_compare(const at::Tensor& torch_out, const at::Tensor& ort_out) {
  OnnxDiff d;
  d.max_abs = (torch_out - ort_out).abs().max().item<double>();
  d.scale = torch_out.abs().max().item<double>();
  return d;
}

/// Gives every norm layer random statistics and affine parameters (fresh ones are 0 and 1, and
/// some zoo models start their last BN gamma at zero), so the export of each is exercised.
void onnx_randomize_norms(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& b : m.named_buffers()) {
    const auto& k = b.key();
    if (k.size() > 13 && k.compare(k.size() - 13, 13, ".running_mean") == 0)
      b.value().normal_(0, 0.1);
    if (k.size() > 12 && k.compare(k.size() - 12, 12, ".running_var") == 0)
      b.value().uniform_(0.5, 1.5);
  }
  for (auto& mod : m.modules(/*include_self=*/false))
    if (std::string(mod->name()).find("BatchNorm") != std::string::npos)
      for (auto& p : mod->named_parameters(/*recurse=*/false))
        p.key() == "weight" ? p.value().uniform_(0.5, 1.5) : p.value().normal_(0, 0.1);
}

/// Exports zoo model `name` with dynamic batch (and H, W for SR models or when `dynamic_hw`), then
/// compares LibTorch and onnxruntime on random inputs of batch 2 (and two other sizes with H, W).
void check_against_onnxruntime(const std::string& name, bool dynamic_hw = false) {
  auto m = make(name);
  onnx_randomize_norms(*m);
  m->eval();
  const auto graph = graph_of(m, name);
  const Shape in = m->input_shape();
  const bool sr = m->input_shape().size() == 4 && graph.shape(graph.outputs()[0]).size() == 4;
  const auto dir = onnx_test_folder(name);
  const auto path = dir / (name + ".onnx");
  export_onnx(*m, graph, OnnxExportOptions().dynamic_batch(true).dynamic_hw(sr || dynamic_hw),
              path);
  std::vector<Shape> shapes = {{2, in[1], in[2], in[3]}};
  if (sr || dynamic_hw) {
    shapes.push_back({1, in[1], in[2] - 8, in[3] + 5});
    shapes.push_back({2, in[1], in[2] + 9, in[3] - 4});
  }
  torch::manual_seed(1);
  for (const auto& s : shapes) {
    const auto x = torch::rand(s);
    at::Tensor expected;
    {
      torch::NoGradGuard no_grad;
      expected = m->forward(x);
    }
    const auto got = onnx_runtime_forward(path, x, dir);
    if (!got.defined()) return;
    ASSERT_EQ(got.sizes(), expected.sizes()) << name << " at " << shape_to_string(s);
    const auto d = onnx_compare(expected, got);
    std::printf("[ onnx     ] %s %s: max |torch - ort| = %.3g (max |y| = %.3g)\n", name.c_str(),
                shape_to_string(s).c_str(), d.max_abs, d.scale);
    EXPECT_LE(d.max_abs, 1e-4 * d.scale) << name << " at " << shape_to_string(s);
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);  // large models write 100 MB
}

}  // namespace

TEST(OnnxExport, ResNet20PassesTheCheckerWithModuleAndParameterNames) {
  auto m = make("resnet20_cifar");
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto dir = onnx_test_folder("names");
  const auto path = dir / "resnet20.onnx";
  const auto r = export_onnx(*m, graph, OnnxExportOptions().dynamic_batch(true), path);
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  const auto model = load_onnx_model(path);
  EXPECT_EQ(model.ir_version(), 7);
  ASSERT_EQ(model.opset_import_size(), 1);
  EXPECT_EQ(model.opset_import(0).version(), 13);
  EXPECT_EQ(model.producer_name(), "igb");

  std::set<std::string> nodes, inits;
  std::map<std::string, std::string> type_of;
  for (const auto& n : model.graph().node()) {
    nodes.insert(n.name());
    type_of[n.name()] = n.op_type();
  }
  for (const auto& i : model.graph().initializer()) inits.insert(i.name());
  EXPECT_EQ(type_of["conv1"], "Conv");
  EXPECT_EQ(type_of["layer1.0.conv1"], "Conv");
  EXPECT_EQ(type_of["layer1.0.bn1"], "BatchNormalization");
  EXPECT_EQ(type_of["fc"], "Gemm");
  for (const char* p : {"conv1.weight", "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var",
                        "layer3.2.conv2.weight", "fc.weight", "fc.bias"})
    EXPECT_TRUE(inits.count(p)) << p;
  // Every op of the graph is a node of the same name (no pass-through ops in ResNet-20).
  for (const auto& op : graph.ops()) EXPECT_TRUE(nodes.count(op.name)) << op.name;
  EXPECT_EQ(r.nodes, static_cast<int64_t>(graph.ops().size()));
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_EQ(r.inputs[0].name, "input");
  EXPECT_EQ(r.inputs[0].dims, (std::vector<std::string>{"N", "3", "32", "32"}));
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].dims, (std::vector<std::string>{"N", "10"}));
  EXPECT_EQ(model.graph().input(0).type().tensor_type().shape().dim(0).dim_param(), "N");
}

TEST(OnnxExport, LogSoftmaxIsExportedAsLogSoftmax) {
  auto m = make("simplenet_mnist");
  const auto graph = graph_of(m, "simplenet_mnist");
  const auto path = onnx_test_folder("log_softmax") / "m.onnx";
  export_onnx(*m, graph, OnnxExportOptions(), path);
  const auto model = load_onnx_model(path);
  int log_softmax = 0, softmax = 0;
  for (const auto& n : model.graph().node()) {
    log_softmax += n.op_type() == "LogSoftmax";
    softmax += n.op_type() == "Softmax";
  }
  EXPECT_EQ(log_softmax, 1);
  EXPECT_EQ(softmax, 0);
}

namespace {

struct OnnxFakeQuantNet : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  bool erf = false;
  explicit OnnxFakeQuantNet(bool use_erf) : erf(use_erf) {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = conv->forward(x);
    return erf ? y.erf() : torch::fake_quantize_per_tensor_affine(y, 0.1, 0, -128, 127);
  }
};

}  // namespace

TEST(OnnxExport, AnOpWithoutMappingIsRefusedByTypeAndLayerAndNothingIsWritten) {
  for (const bool erf : {false, true}) {
    torch::manual_seed(0);
    OnnxFakeQuantNet net(erf);
    const auto graph = SummaryGraph::build(
        net, {1, 3, 8, 8}, [&](const torch::Tensor& x) { return net.forward(x); }, "fq_net");
    const OpNode* unmapped = nullptr;
    for (const auto& op : graph.ops())
      if (op.op_kind == (erf ? OpKind::kOther : OpKind::kFakeQuantize)) unmapped = &op;
    ASSERT_NE(unmapped, nullptr);
    const auto path = onnx_test_folder(erf ? "erf" : "fq") / "m.onnx";
    try {
      export_onnx(net, graph, OnnxExportOptions(), path);
      ADD_FAILURE() << "exported an op without mapping";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(erf ? "erf" : "FakeQuantize"), std::string::npos) << what;
      EXPECT_NE(what.find("'" + unmapped->name + "'"), std::string::npos) << what;
    }
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(fs::is_empty(path.parent_path()));
  }
}

TEST(OnnxExport, OtherOpsetsAreRefused) {
  auto m = make("espcn");
  const auto graph = graph_of(m, "espcn");
  const auto path = onnx_test_folder("opset") / "m.onnx";
  EXPECT_THROW(export_onnx(*m, graph, OnnxExportOptions().opset(11), path), InputError);
  EXPECT_FALSE(fs::exists(path));
}

TEST(OnnxExport, NpyRoundTripAndMalformedFiles) {
  const auto dir = onnx_test_folder("npy");
  torch::manual_seed(0);
  const auto x = torch::randn({2, 3, 5});
  write_npy(dir / "x.npy", x);
  const auto y = read_npy(dir / "x.npy");
  EXPECT_TRUE(torch::equal(x, y));
  std::ofstream(dir / "bad.npy") << "not numpy";
  EXPECT_THROW(read_npy(dir / "bad.npy"), InputError);
  auto bytes = read_text_file(dir / "x.npy");
  std::ofstream(dir / "short.npy", std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  EXPECT_THROW(read_npy(dir / "short.npy"), InputError);
}

// Flatten to [N, -1] and global pooling follow other input sizes.
TEST(OnnxExport, ResNet20WithDynamicHeightAndWidthMatchesOnnxRuntime) {
  check_against_onnxruntime("resnet20_cifar", /*dynamic_hw=*/true);
}

/// LibTorch against onnxruntime, one zoo model per test.
class OnnxRuntimeMatches : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRuntimeMatches, ZooModel) { check_against_onnxruntime(GetParam()); }

// Every zoo model but the 224x224 VGGs (130 M parameters and more: 5-8 s each, written files of
// 0.5 GB), which pass the same comparison when run by hand.
INSTANTIATE_TEST_SUITE_P(
    Zoo, OnnxRuntimeMatches,
    ::testing::Values("srcnn", "fsrcnn", "espcn", "vdsr", "resnet20_cifar", "resnet32_cifar",
                      "resnet44_cifar", "resnet56_cifar", "resnet110_cifar",
                      "preact_resnet20_cifar", "preact_resnet32_cifar", "preact_resnet44_cifar",
                      "preact_resnet56_cifar", "preact_resnet110_cifar", "plain20_cifar",
                      "densenet_cifar", "vgg11_cifar", "vgg11_bn_cifar", "vgg13_cifar",
                      "vgg13_bn_cifar", "vgg16_cifar", "vgg16_bn_cifar", "vgg19_cifar",
                      "vgg19_bn_cifar", "simplenet_cifar", "simplenet_mnist", "lenet5", "alexnet",
                      "alexnet_bn", "mobilenet", "mobilenet_025", "mobilenet_050", "mobilenet_075",
                      "mobilenet_v2", "resnet18", "resnet34", "resnet50", "preact_resnet18",
                      "preact_resnet34", "preact_resnet50"),
    [](const auto& info) { return info.param; });

}  // namespace igb::tools
