#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "compress/post_train_quantizer.h"
#include "compress/scheduler.h"
#include "compress/thinning.h"
#include "compress/training_hooks.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/npy.h"
#include "core/thinning_recipe.h"
#include "data/synthetic_images.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_layer_check.h"
#include "deploy/onnx/onnx_ops.h"
#include "deploy/onnx/onnx_runtime.h"
#include "graph/summary_graph.h"
#include "models/trainer.h"
#include "runtime/inference_model.h"
#include "tests/tools/tools_support.h"

namespace igb::deploy {

using tools::graph_of;
using tools::make;

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
  try {
    return OnnxRuntimeRunner(model, dir).run(x);
  } catch (const InputError& e) {
    ADD_FAILURE() << e.what();
    return {};
  }
}

/// `m`'s forward of `x` without gradients.
at::Tensor forward_no_grad(const models::Model& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  return m->forward(x);
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
    const auto expected = forward_no_grad(m, x);
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

TEST(OnnxExport, TheExporterMapsOpKindsToOnnxItself) {
  EXPECT_STREQ(onnx_mapping(OpKind::kPixelShuffle).op, "DepthToSpace");
  EXPECT_STREQ(onnx_mapping(OpKind::kLinear).op, "Gemm");
  EXPECT_STREQ(onnx_mapping(OpKind::kAdaptiveAvgPool).op, "GlobalAveragePool");
  EXPECT_EQ(onnx_mapping(OpKind::kConv).emit, &emit_conv);
  // A fake quantization is written by the Q/DQ pass, not on its own.
  EXPECT_STREQ(onnx_mapping(OpKind::kFakeQuantize).op, "QuantizeLinear");
  EXPECT_EQ(onnx_mapping(OpKind::kFakeQuantize).emit, nullptr);
  EXPECT_EQ(onnx_mapping(OpKind::kGroupNorm).op, nullptr);
  EXPECT_EQ(onnx_mapping(OpKind::kOther).emit, nullptr);
  // Every op kind with an emitter has an operator name.
  for (const auto& info : graph::op_table())
    if (onnx_mapping(info.kind).emit) EXPECT_NE(onnx_mapping(info.kind).op, nullptr) << info.type;
}

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
  // A forged header whose shape's product overflows 64 bits (to 0, which its 0 data bytes would
  // match) is refused from the header, before anything is allocated.
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string forged("\x93NUMPY\x01\x00", 8);
  forged += static_cast<char>(header.size() & 0xff);
  forged += static_cast<char>(header.size() >> 8);
  std::ofstream(dir / "huge.npy", std::ios::binary) << forged + header;
  try {
    read_npy(dir / "huge.npy");
    ADD_FAILURE() << "a forged shape was read";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "huge.npy").string() +
                                         ": not a float32 .npy file (its shape (4294967296, "
                                         "4294967296) needs more data than the 0 bytes the file "
                                         "holds)");
  }
}

// Flatten to [N, -1] and global pooling follow other input sizes.
TEST(OnnxExport, ResNet20WithDynamicHeightAndWidthMatchesOnnxRuntime) {
  check_against_onnxruntime("resnet20_cifar", /*dynamic_hw=*/true);
}

// A model thinned by remove_filters exports with its thinned shapes and computes what it computes.
TEST(OnnxExport, AThinnedResNet20ExportsItsThinnedShapesAndMatches) {
  const std::string name = "resnet20_cifar";
  auto m = make(name);
  onnx_randomize_norms(*m);
  m->eval();
  {
    torch::NoGradGuard no_grad;
    auto p = m->named_parameters();
    for (const char* k : {"layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
                          "layer2.1.conv1.weight", "layer2.1.bn1.weight", "layer2.1.bn1.bias"})
      p[k].narrow(0, 0, 5).zero_();
  }
  const auto plan =
      compress::plan_thinning(*m, graph_of(m, name), compress::ThinningKind::kFilters);
  ASSERT_EQ(plan.removed_groups, 10);
  apply_thinning_recipe(*m, plan.recipe, name);
  const auto graph = graph_of(m, name);
  const auto dir = onnx_test_folder("thinned");
  const auto path = dir / "thinned.onnx";
  export_onnx(*m, graph, OnnxExportOptions().dynamic_batch(true), path);
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  std::map<std::string, std::vector<int64_t>> dims;
  const auto model = load_onnx_model(path);
  for (const auto& i : model.graph().initializer())
    dims[i.name()] = {i.dims().begin(), i.dims().end()};
  EXPECT_EQ(dims["layer1.0.conv1.weight"], (std::vector<int64_t>{11, 16, 3, 3}));
  EXPECT_EQ(dims["layer1.0.conv2.weight"], (std::vector<int64_t>{16, 11, 3, 3}));
  EXPECT_EQ(dims["layer2.1.conv1.weight"], (std::vector<int64_t>{27, 32, 3, 3}));
  torch::manual_seed(3);
  const auto x = torch::rand({4, 3, 32, 32});
  const auto expected = forward_no_grad(m, x);
  const auto got = onnx_runtime_forward(path, x, dir);
  if (!got.defined()) return;
  const auto d = onnx_compare(expected, got);
  EXPECT_LE(d.max_abs, 1e-4 * d.scale) << d.max_abs;
}

/// LibTorch against onnxruntime, one zoo model per test.
class OnnxRuntimeMatches : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxRuntimeMatches, ZooModel) { check_against_onnxruntime(GetParam()); }

// Every zoo model but the 224x224 VGGs (130 M parameters and more: 5-8 s each, written files of
// 0.5 GB), which pass the same comparison in DISABLED_Vgg224 below, run by hand.
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

// igb_tools_tests --gtest_also_run_disabled_tests --gtest_filter='DISABLED_Vgg224*'
INSTANTIATE_TEST_SUITE_P(DISABLED_Vgg224, OnnxRuntimeMatches,
                         ::testing::Values("vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16",
                                           "vgg16_bn", "vgg19", "vgg19_bn"),
                         [](const auto& info) { return info.param; });

INSTANTIATE_TEST_SUITE_P(Deblur, OnnxRuntimeMatches, ::testing::Values("patchgan"),
                         [](const auto& info) { return info.param; });

// The generator's side must be a multiple of 4 (two stride-2 stages and back), which the sizes of
// check_against_onnxruntime are not: reflection pads, instance norms, transposed convs, tanh and
// the clamped global skip, exported with dynamic H and W and run at three sizes.
TEST(OnnxExport, DeblurGanSmallMatchesOnnxRuntime) {
  const std::string name = "deblurgan_small";
  auto m = make(name);
  m->eval();
  const auto graph = graph_of(m, name);
  const auto dir = onnx_test_folder(name);
  const auto path = dir / (name + ".onnx");
  export_onnx(*m, graph, OnnxExportOptions().dynamic_batch(true).dynamic_hw(true), path);
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  std::set<std::string> ops;
  const auto proto = load_onnx_model(path);
  for (const auto& node : proto.graph().node()) {
    ops.insert(node.op_type());
    if (node.op_type() == "Pad")
      for (const auto& a : node.attribute())
        if (a.name() == "mode") EXPECT_EQ(a.s(), "reflect");
  }
  for (const char* op :
       {"Pad", "Conv", "InstanceNormalization", "Relu", "ConvTranspose", "Tanh", "Add", "Clip"})
    EXPECT_TRUE(ops.count(op)) << op;
  torch::manual_seed(1);
  for (const Shape& s : {Shape{2, 3, 64, 64}, Shape{1, 3, 48, 72}, Shape{2, 3, 36, 28}}) {
    const auto x = torch::rand(s) * 2 - 1;
    const auto expected = forward_no_grad(m, x);
    const auto got = onnx_runtime_forward(path, x, dir);
    if (!got.defined()) return;
    ASSERT_EQ(got.sizes(), expected.sizes()) << shape_to_string(s);
    const auto d = onnx_compare(expected, got);
    std::printf("[ onnx     ] %s %s: max |torch - ort| = %.3g (max |y| = %.3g)\n", name.c_str(),
                shape_to_string(s).c_str(), d.max_abs, d.scale);
    EXPECT_LE(d.max_abs, 1e-4 * d.scale) << shape_to_string(s);
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace igb::deploy

// ---- INT8 Q/DQ and FP16 export ----

namespace igb::deploy {

namespace {

/// One SGD step through the scheduler's hooks (as the Trainer calls them), so quantization ranges
/// and quantized weights are those of a trained model.
void qdq_train_steps(torch::nn::Module& model, const models::Model& m,
                     compress::CompressionScheduler& s, const Shape& shape, int steps) {
  models::TrainConfig config;
  config.optimizer = "sgd";
  config.lr = 0.01;
  config.momentum = 0.9;
  auto opt = models::make_optimizer(config, model.parameters(), s.param_groups());
  model.train();
  for (int i = 0; i < steps; ++i) {
    const auto x = torch::rand(shape);
    compress::MinibatchInfo info{0, i, steps};
    s.on_minibatch_begin(info, *opt);
    auto loss = m->forward(x).pow(2).mean();
    loss = s.before_backward_pass(info, loss, *opt);
    opt->zero_grad();
    loss.backward();
    s.before_parameter_optimization(info, *opt);
    opt->step();
    s.on_minibatch_end(info, *opt);
  }
  model.eval();
}

std::string qdq_schedule(const std::string& cls, const std::string& body) {
  return "version: 1\nquantizers:\n  q:\n    class: " + cls + "\n" + body +
         "policies:\n  - quantizer:\n      instance_name: q\n    starting_epoch: 0\n"
         "    ending_epoch: 200\n    frequency: 1\n";
}

/// Q/DQ nodes of `model`; every zero point must be an INT8 initializer.
int64_t qdq_node_count(const onnx::ModelProto& model) {
  std::map<std::string, int> type_of;
  for (const auto& i : model.graph().initializer()) type_of[i.name()] = i.data_type();
  int64_t n = 0;
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "QuantizeLinear" && node.op_type() != "DequantizeLinear") continue;
    ++n;
    EXPECT_EQ(node.input_size(), 3) << node.name();
    if (node.input_size() == 3) {
      EXPECT_EQ(type_of[node.input(2)], onnx::TensorProto::INT8) << node.name();
      EXPECT_EQ(type_of[node.input(1)], onnx::TensorProto::FLOAT) << node.name();
    }
  }
  return n;
}

/// Fraction of elements of `got` within `tol` of `expected`.
double qdq_fraction_within(const at::Tensor& expected, const at::Tensor& got, double tol) {
  return (expected - got).abs().le(tol).to(at::kDouble).mean().item<double>();
}

/// Exports a QAT-trained `m` with --int8-qdq and compares onnxruntime with the fake-quantized eval
/// forward in units of the output quantization step, max|y|/127 (the step of a symmetric int8
/// grid over the output's range): at least 99.9% of the elements within `steps` steps, and at
/// least `one_step` of them within one step. `any_qdq`: whether the file holds Q/DQ nodes. A model
/// with fake quantization is also checked layer by layer (check_qdq_layers): in every quantized
/// layer all values within one step, and the output computed from onnxruntime's layers within
/// 1e-4 of max |y|.
OnnxExportReport qdq_check(const models::Model& m, const std::string& name, const Shape& in,
                           bool compare = true, double steps = 1, double one_step = 0.999,
                           bool any_qdq = true) {
  const auto graph = graph_of(m, name);
  const auto dir = onnx_test_folder("qdq_" + name);
  const auto path = dir / "m.onnx";
  const auto r = export_onnx(
      *m, graph, OnnxExportOptions().dynamic_batch(true).precision(OnnxPrecision::kInt8), path);
  EXPECT_EQ(r.precision, "int8");
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  EXPECT_EQ(qdq_node_count(load_onnx_model(path)) > 0, any_qdq);
  if (!compare) return r;
  torch::manual_seed(7);
  const auto x = torch::rand(in);
  const auto expected = forward_no_grad(m, x);
  const auto got = onnx_runtime_forward(path, x, dir);
  if (!got.defined()) return r;
  const double step = expected.abs().max().item<double>() / 127.0;
  const double within = qdq_fraction_within(expected, got, step);
  std::printf("[ qdq      ] %s: max |torch - ort| = %.3g, step %.3g, within one step %.5f\n",
              name.c_str(), (expected - got).abs().max().item<double>(), step, within);
  EXPECT_GE(within, one_step) << name;
  EXPECT_GE(qdq_fraction_within(expected, got, steps * step), 0.999) << name;
  if (r.quantized_values.empty()) return r;
  // Layer by layer, each quantized layer fed onnxruntime's values of the layers before it.
  const auto check = check_qdq_layers(*m, graph, r, x, dir / "layers");
  EXPECT_EQ(check.layers.size(), r.quantized_values.size());
  for (const auto& l : check.layers) {
    EXPECT_GE(l.within_one_step, 0.999) << name << " " << l.layer;
    EXPECT_LE(l.max_steps, 1.001) << name << " " << l.layer;
  }
  std::printf(
      "[ qdq      ] %s: %zu quantized layers, the worst within one step %.5f; output "
      "from onnxruntime's layers: max |torch - ort| = %.3g of max |y| = %.3g\n",
      name.c_str(), check.layers.size(), check.worst_within_one_step(), check.output_max_abs,
      check.output_max);
  EXPECT_LE(check.output_max_abs, 1e-4 * check.output_max) << name;
  return r;
}

/// A ResNet-20 trained `steps` steps under schedules/classify/resnet20_int8_qat.yaml.
models::Model qat_resnet20(int steps) {
  auto m = make("resnet20_cifar");
  const auto text =
      read_text_file(fs::path(IGB_SOURCE_DIR) / "schedules/classify/resnet20_int8_qat.yaml");
  auto s =
      compress::CompressionScheduler::from_text(text, "resnet20_int8_qat.yaml", *m, 0.01, nullptr);
  qdq_train_steps(*m, m, *s, {8, 3, 32, 32}, steps);
  return m;
}

}  // namespace

/// The CPU placement's integer weights exact on this machine's onnxruntime kernels: int8 with
/// VNNI, uint8 (U8U8) where u8×s8 pairs saturate.
QdqCpuWeights exact_weights_here() {
  return runtime::int8_isa().pairs_saturate ? QdqCpuWeights::kUint8 : QdqCpuWeights::kInt8;
}

TEST(OnnxQdq, CpuPlacementFoldsBatchNormIntoIntegerLayersAndMatchesIgbsIntegerModel) {
  auto m = qat_resnet20(3);
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto dir = onnx_test_folder("qdq_cpu");
  const auto path = dir / "m.onnx";
  auto calibration = std::make_shared<OnnxCalibration>(calibrate_onnx(
      *m, graph,
      [](const std::function<void(const at::Tensor&)>& f) {
        for (int i = 0; i < 2; ++i) f(torch::rand({8, 3, 32, 32}));
      },
      "max", 99.99));
  const auto r = export_onnx(*m, graph,
                             OnnxExportOptions()
                                 .dynamic_batch(true)
                                 .precision(OnnxPrecision::kInt8)
                                 .qdq_placement(QdqPlacement::kCpu)
                                 .qdq_cpu_weights(exact_weights_here())
                                 .calibration(calibration),
                             path);
  EXPECT_EQ(r.qdq_placement, "cpu");
  EXPECT_EQ(r.exact_on.rfind("every x86 CPU", 0) == 0,
            exact_weights_here() == QdqCpuWeights::kUint8)
      << r.exact_on;
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  // What onnxruntime's QDQ fusion needs: every Conv reads DequantizeLinear outputs (input,
  // int8 weights, int32 bias), no BatchNormalization is left, activations are uint8.
  const auto model = load_onnx_model(path);
  std::map<std::string, int> producer_type;
  std::map<std::string, int> init_type;
  for (const auto& init : model.graph().initializer()) init_type[init.name()] = init.data_type();
  std::map<std::string, std::string> made_by;
  for (const auto& n : model.graph().node())
    for (const auto& o : n.output()) made_by[o] = n.op_type();
  int convs = 0;
  for (const auto& n : model.graph().node()) {
    EXPECT_NE(n.op_type(), "BatchNormalization");
    if (n.op_type() == "QuantizeLinear") {
      EXPECT_EQ(init_type[n.input(2)], onnx::TensorProto::UINT8) << n.name();
    }
    if (n.op_type() != "Conv") continue;
    ++convs;
    ASSERT_EQ(n.input_size(), 3) << n.name();
    for (int i = 0; i < 3; ++i) EXPECT_EQ(made_by[n.input(i)], "DequantizeLinear") << n.name();
  }
  EXPECT_EQ(convs, 19);
  const int weight_type = exact_weights_here() == QdqCpuWeights::kUint8 ? onnx::TensorProto::UINT8
                                                                        : onnx::TensorProto::INT8;
  for (const auto& n : model.graph().node())
    if (n.op_type() == "DequantizeLinear" && init_type.count(n.input(0)))
      EXPECT_TRUE(init_type[n.input(0)] == weight_type ||
                  init_type[n.input(0)] == onnx::TensorProto::INT32)
          << n.name();
  // onnxruntime against igb's integer model, layer by layer (each fake quantization fed
  // onnxruntime's values of the layers before it): every value within one step. A block's
  // output is quantized once more here (the residual add's conv operand, for QLinearAdd), so a
  // few per cent of its values land one step over; the other layers differ only where float
  // sums round differently.
  torch::manual_seed(7);
  const auto x = torch::rand({16, 3, 32, 32});
  const auto check = check_qdq_layers(*m, graph, r, x, dir / "layers");
  EXPECT_EQ(check.layers.size(), 20u);
  // The operand's extra rounding (half a step of its calibrated grid, which may be coarser than
  // the output's) can put a block output two steps off (one value of 131072 here on AVX2).
  for (const auto& l : check.layers) {
    const bool block_output = l.layer.find("relu2") != std::string::npos;
    EXPECT_GE(l.within_one_step, 0.999) << l.layer;
    EXPECT_LE(l.max_steps, block_output ? 2.001 : 1.001) << l.layer;
    EXPECT_GE(l.exact, block_output ? 0.9 : 0.99) << l.layer;
  }
  // End to end the flips add up through nine blocks; the class mostly stays.
  runtime::InferenceOptions o;
  o.int8 = true;
  o.int8_engine = runtime::Int8Engine::kOneDnn;
  auto form = runtime::InferenceModel::make(
      m, [m](const at::Tensor& t) { return m->forward(t); }, "resnet20_cifar", o);
  const auto expected = form->forward(x);
  const auto got = onnx_runtime_forward(path, x, dir);
  if (!got.defined()) return;
  const double agree = (expected.argmax(1) == got.argmax(1)).to(at::kFloat).mean().item<double>();
  std::printf(
      "[ qdq cpu  ] %zu layers, the worst within one step %.5f; end to end top-1 "
      "agreement with igb's integer model %.3f\n",
      check.layers.size(), check.worst_within_one_step(), agree);
  EXPECT_GE(agree, 0.8);
}

TEST(OnnxQdq, CpuPlacementSaysWhichCpusItsIntegerWeightsAreExactOn) {
  // 8-bit weights: two of a filter against a uint8 input pass 16 bits, which only VNNI's 32-bit
  // sums hold; the same integers as uint8 (zero point 128) are exact on every x86 CPU.
  auto m = qat_resnet20(1);
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto dir = onnx_test_folder("qdq_cpu_targets");
  auto options =
      OnnxExportOptions().precision(OnnxPrecision::kInt8).qdq_placement(QdqPlacement::kCpu);
  const auto s8 = export_onnx(*m, graph, options, dir / "s8.onnx");
  EXPECT_EQ(s8.exact_on.rfind("x86 CPUs with VNNI", 0), 0u) << s8.exact_on;
  EXPECT_NE(s8.exact_on.find(" of 19 layers ("), std::string::npos) << s8.exact_on;
  const auto u8 =
      export_onnx(*m, graph, options.qdq_cpu_weights(QdqCpuWeights::kUint8), dir / "u8.onnx");
  EXPECT_EQ(u8.exact_on, "every x86 CPU (uint8 weights: onnxruntime's U8U8 kernels)");
  // The same values: every uint8 weight is its int8 twin plus 128, zero point 128.
  const auto a = load_onnx_model(dir / "s8.onnx"), b = load_onnx_model(dir / "u8.onnx");
  std::map<std::string, const onnx::TensorProto*> in_b;
  for (const auto& t : b.graph().initializer()) in_b[t.name()] = &t;
  int weights = 0;
  for (const auto& t : a.graph().initializer()) {
    if (t.data_type() != onnx::TensorProto::INT8 || t.name().find("weight/q") == std::string::npos)
      continue;
    const auto& u = *in_b.at(t.name());
    ASSERT_EQ(u.data_type(), onnx::TensorProto::UINT8) << t.name();
    ASSERT_EQ(u.raw_data().size(), t.raw_data().size());
    for (size_t i = 0; i < t.raw_data().size(); ++i)
      ASSERT_EQ(static_cast<int>(static_cast<uint8_t>(u.raw_data()[i])),
                static_cast<int>(static_cast<int8_t>(t.raw_data()[i])) + 128)
          << t.name();
    ++weights;
  }
  EXPECT_EQ(weights, 19);
}

TEST(OnnxQdq, CpuPlacementRefusesAGridNarrowerThan8BitsInOneLine) {
  // A 4-bit DoReFa grid clamps at 15 steps, which no 8-bit type's saturation gives.
  auto m = make("resnet20_cifar");
  auto s = compress::CompressionScheduler::from_text(
      qdq_schedule("DorefaQuantizer", "    bits_activations: 4\n    bits_weights: 4\n"), "q.yaml",
      *m, 0.01, nullptr);
  qdq_train_steps(*m, m, *s, {2, 3, 32, 32}, 1);
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto path = onnx_test_folder("qdq_cpu_4bit") / "m.onnx";
  try {
    export_onnx(
        *m, graph,
        OnnxExportOptions().precision(OnnxPrecision::kInt8).qdq_placement(QdqPlacement::kCpu),
        path);
    ADD_FAILURE() << "a 4-bit grid was exported with the CPU placement";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("ends at 15 steps"), std::string::npos) << what;
    EXPECT_NE(what.find("--qdq-placement tensorrt"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path));
}

TEST(OnnxQdq, Resnet20Int8QatMatchesOnnxRuntimeLayerByLayer) {
  auto m = qat_resnet20(3);
  // Layer by layer (qdq_check), every value of all 20 quantized layers is within one step. End to
  // end, through 19 quantized layers, a last-bit difference of a conv sum (onnxruntime's and
  // LibTorch's accumulation orders differ) moves a value across a rounding boundary now and then,
  // and the flip propagates: LibTorch against itself with every BN bias moved by 1e-6 keeps only
  // 51% of the outputs within one step (max 4.5 steps). onnxruntime: 92.5% within one step, all
  // within 4.
  const auto r = qdq_check(m, "resnet20_cifar", {16, 3, 32, 32}, true, 4, 0.9);
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(7);
    const auto x = torch::rand({16, 3, 32, 32});
    const auto y = m->forward(x);
    for (auto& p : m->named_parameters())
      if (p.key().find(".bn") != std::string::npos && p.key().find("bias") != std::string::npos)
        p.value().add_(1e-6);
    const auto moved = m->forward(x);
    const double step = y.abs().max().item<double>() / 127.0;
    std::printf("[ qdq      ] LibTorch, BN biases moved by 1e-6: within one step %.5f, max %.3g\n",
                qdq_fraction_within(y, moved, step), (y - moved).abs().max().item<double>() / step);
  }
  // The input, 19 ReLUs and the downsampling blocks' zero-padded skips; 20 weights.
  EXPECT_GE(r.activation_scales.size(), 20u);
  EXPECT_EQ(r.weight_scales.size(), 20u);
  ASSERT_TRUE(r.weight_scales.count("layer1.0.conv1.weight"));
  EXPECT_EQ(r.weight_scales.at("layer1.0.conv1.weight").size(), 16u);
  // fc reads the average pool of quantized values, which the QAT model keeps float.
  for (const auto& line : r.lines) {
    std::printf("  note: %s\n", line.c_str());
    EXPECT_EQ(line.rfind("layer fc:", 0), 0u) << line;
  }
}

// The layer-by-layer check finds a layer whose grid in the file is not the model's, and only that
// one: the layers after it read onnxruntime's values in both runtimes.
TEST(OnnxQdq, LayerCheckFlagsTheOneLayerWhoseScaleWasChanged) {
  auto m = qat_resnet20(2);
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto dir = onnx_test_folder("qdq_tampered");
  const auto path = dir / "m.onnx";
  const auto r = export_onnx(
      *m, graph, OnnxExportOptions().dynamic_batch(true).precision(OnnxPrecision::kInt8), path);
  auto proto = load_onnx_model(path);
  const std::string victim = "layer2.1.relu1.fakequantize";
  int changed = 0;
  for (auto& init : *proto.mutable_graph()->mutable_initializer())
    if (init.name() == victim + "/scale") {
      init.set_float_data(0, init.float_data(0) * 4);
      ++changed;
    }
  ASSERT_EQ(changed, 1);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(proto.SerializeToOstream(&f));
  }
  torch::manual_seed(3);
  const auto check = check_qdq_layers(*m, graph, r, torch::rand({8, 3, 32, 32}), dir / "layers");
  ASSERT_EQ(check.layers.size(), 20u);
  for (const auto& l : check.layers) {
    if (l.layer == victim) {
      EXPECT_LT(l.within_one_step, 0.9) << l.layer;
      EXPECT_GE(l.max_steps, 1.5) << l.layer;
    } else {
      EXPECT_GE(l.within_one_step, 0.999) << l.layer;
    }
  }
  EXPECT_LT(check.worst_within_one_step(), 0.9);
  // A report without fake quantization has nothing to compare.
  OnnxExportReport plain = r;
  plain.quantized_values.clear();
  EXPECT_THROW(check_qdq_layers(*m, graph, plain, torch::rand({8, 3, 32, 32}), dir / "layers"),
               InputError);
}

TEST(OnnxQdq, FsrcnnDorefaAndPact4BitAreExactAndTheShippedPactScheduleExportsExactly) {
  const nlohmann::json args = {{"d", 8}, {"s", 4}, {"m", 1}};
  for (const char* cls : {"DorefaQuantizer", "PACTQuantizer"}) {
    auto m = make("fsrcnn", args);
    auto s = compress::CompressionScheduler::from_text(
        qdq_schedule(cls, "    bits_activations: 4\n    bits_weights: 4\n"), "q.yaml", *m, 0.01,
        nullptr);
    const Shape in = m->input_shape();
    qdq_train_steps(*m, m, *s, {2, in[1], in[2], in[3]}, 2);
    const auto r = qdq_check(m, std::string("fsrcnn_") + cls, {2, in[1], in[2], in[3]});
    EXPECT_GE(r.weight_scales.size(), 3u) << cls;
    for (const auto& [w, scales] : r.weight_scales) {
      if (w.find("mid_part") == std::string::npos) continue;
      for (float v : scales) EXPECT_FLOAT_EQ(v, 1.0f / 15.0f) << cls << " " << w;
    }
    for (const auto& line : r.lines) EXPECT_EQ(line.find("does not fit"), std::string::npos);
  }
  // schedules/sr/fsrcnn_pact.yaml: 8-bit DoReFa weights (integers up to ±255 at scale 1/255) on
  // the shrink and mapping convs, whose inputs are PReLU outputs that stay float. TensorRT runs
  // those layers in float, so the trained weight values are written exactly, with a note each.
  auto m = make("fsrcnn");
  const auto text = read_text_file(fs::path(IGB_SOURCE_DIR) / "schedules/sr/fsrcnn_pact.yaml");
  auto s = compress::CompressionScheduler::from_text(text, "fsrcnn_pact.yaml", *m, 0.01, nullptr);
  const Shape in = m->input_shape();
  qdq_train_steps(*m, m, *s, {2, in[1], in[2], in[3]}, 2);
  const auto r = qdq_check(m, "fsrcnn_pact", {2, in[1], in[2], in[3]}, true, 1, 0.999, false);
  int exact = 0;
  for (const auto& line : r.lines) {
    std::printf("  note: %s\n", line.c_str());
    exact += line.rfind("layer mid_part", 0) == 0 &&
             line.find(
                 "beyond int8's ±127, and its input stays float: weights written as their "
                 "quantized values in float (exact)") != std::string::npos;
  }
  EXPECT_EQ(exact, 5);  // the shrink conv and the four mapping convs
  ASSERT_FALSE(r.lines.empty());
  EXPECT_NE(r.lines.back().find("no Q/DQ pair was written"), std::string::npos);
  EXPECT_TRUE(r.weight_scales.empty());
}

// PACT activations on [0, α] with 15 levels: scale α/15, zero point 0; 3-bit DoReFa weights: scale
// 1/7. 8-bit PACT activations (255 levels) do not fit int8 and are reported.
TEST(OnnxQdq, Resnet20PactGridsMapOntoInt8) {
  for (const int bits : {4, 8}) {
    auto m = make("resnet20_cifar");
    auto s = compress::CompressionScheduler::from_text(
        qdq_schedule("PACTQuantizer", "    bits_activations: " + std::to_string(bits) +
                                          "\n    bits_weights: 3\n    act_clip_init_val: 3\n"),
        "q.yaml", *m, 0.01, nullptr);
    qdq_train_steps(*m, m, *s, {8, 3, 32, 32}, 2);
    const auto r = qdq_check(m, "resnet20_pact" + std::to_string(bits), {16, 3, 32, 32},
                             /*compare=*/bits == 4);
    const double alpha =
        m->named_parameters()["layer2.1.relu1.replacement.clip_val"].item<double>();
    bool found = false;
    for (const auto& [value, scale] : r.activation_scales)
      if (value.rfind("layer2.1.relu1", 0) == 0 && bits == 4) {
        found = true;
        EXPECT_NEAR(scale, alpha / 15.0, 1e-6 * alpha) << value;
      }
    EXPECT_EQ(found, bits == 4);
    ASSERT_TRUE(r.weight_scales.count("layer2.1.conv1.weight"));
    EXPECT_FLOAT_EQ(r.weight_scales.at("layer2.1.conv1.weight")[0], 1.0f / 7.0f);
    int unfit = 0;
    for (const auto& line : r.lines) unfit += line.find("does not fit int8") != std::string::npos;
    EXPECT_EQ(unfit, bits == 4 ? 0 : 19) << bits;
  }
}

TEST(OnnxQdq, CalibratedFloatResnet20AgreesWithLibTorchsArgmax) {
  auto m = make("resnet20_cifar");
  auto images = [](uint64_t first, int64_t n) {
    std::vector<at::Tensor> xs;
    for (int64_t i = 0; i < n; ++i)
      xs.push_back(data::render_synthetic_image(32, 32, first + static_cast<uint64_t>(i)));
    return at::stack(xs);
  };
  // Batch-norm statistics of the synthetic images (a fresh model's are 0 and 1), so the logits
  // follow the input rather than the biases.
  {
    torch::NoGradGuard no_grad;
    m->train();
    const auto warm = images(5000, 32);
    for (int i = 0; i < 30; ++i) m->forward(warm);
  }
  m->eval();
  const auto graph = graph_of(m, "resnet20_cifar");
  const auto batches = [&](const std::function<void(const at::Tensor&)>& f) {
    for (uint64_t b = 0; b < 4; ++b) f(images(100 + 16 * b, 16));
  };
  const auto x = images(1000, 64);
  at::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = m->forward(x).argmax(1);
  }
  // The float model does tell the inputs apart (not one class for all).
  EXPECT_GE(std::get<0>(at::_unique(expected)).numel(), 3);
  for (const char* method : {"max", "percentile"}) {
    auto cal = std::make_shared<OnnxCalibration>(calibrate_onnx(*m, graph, batches, method, 99.99));
    EXPECT_EQ(cal->batches, 4);
    EXPECT_GE(cal->amax.size(), 20u);
    const auto dir = onnx_test_folder(std::string("calibrated_") + method);
    const auto path = dir / "m.onnx";
    const auto r = export_onnx(
        *m, graph,
        OnnxExportOptions().dynamic_batch(true).precision(OnnxPrecision::kInt8).calibration(cal),
        path);
    EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
    EXPECT_GT(qdq_node_count(load_onnx_model(path)), 0);
    EXPECT_EQ(r.weight_scales.size(), 20u);
    const auto got = onnx_runtime_forward(path, x, dir);
    if (!got.defined()) return;
    const double agree = got.argmax(1).eq(expected).to(at::kDouble).mean().item<double>();
    std::printf("[ qdq      ] calibrated (%s): argmax agreement %.3f\n", method, agree);
    EXPECT_GE(agree, 0.9) << method;
  }
  EXPECT_THROW(calibrate_onnx(*m, graph, batches, "entropy", 99.99), InputError);
}

// ConvTranspose: its (C_in, C_out, k, k) weight per channel along axis 0, its input calibrated.
TEST(OnnxQdq, CalibratedFloatFsrcnnStaysCloseToLibTorch) {
  auto m = make("fsrcnn", {{"d", 8}, {"s", 4}, {"m", 1}});
  m->eval();
  const auto graph = graph_of(m, "fsrcnn");
  const Shape in = m->input_shape();
  const auto luma = [&](uint64_t seed) {
    return data::render_synthetic_image(in[2], in[3], seed).mean(0, true).unsqueeze(0);
  };
  auto cal = std::make_shared<OnnxCalibration>(calibrate_onnx(
      *m, graph,
      [&](const std::function<void(const at::Tensor&)>& f) {
        for (uint64_t b = 0; b < 4; ++b) f(luma(200 + b));
      },
      "max", 99.99));
  const auto dir = onnx_test_folder("calibrated_fsrcnn");
  const auto path = dir / "m.onnx";
  const auto r = export_onnx(
      *m, graph, OnnxExportOptions().precision(OnnxPrecision::kInt8).calibration(cal), path);
  EXPECT_TRUE(r.weight_scales.count("last_part.weight"));
  const auto x = luma(300);
  const auto expected = forward_no_grad(m, x);
  const auto got = onnx_runtime_forward(path, x, dir);
  if (!got.defined()) return;
  const auto d = onnx_compare(expected, got);
  std::printf("[ qdq      ] calibrated fsrcnn: max |float - int8| = %.3g (max |y| = %.3g)\n",
              d.max_abs, d.scale);
  EXPECT_LE(d.max_abs, 0.05 * d.scale);
}

namespace {

struct OnnxFp16NormNet : torch::nn::Module {
  torch::nn::Conv2d conv{nullptr};
  torch::nn::InstanceNorm2d norm{nullptr};
  OnnxFp16NormNet() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    norm = register_module(
        "norm", torch::nn::InstanceNorm2d(torch::nn::InstanceNorm2dOptions(4).affine(true)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::relu(norm->forward(conv->forward(x)));
  }
};

}  // namespace

TEST(OnnxFp16, InstanceNormPassesTheCheckerAndMatches) {
  torch::manual_seed(0);
  OnnxFp16NormNet net;
  net.eval();
  const auto graph = SummaryGraph::build(
      net, {1, 3, 12, 12}, [&](const torch::Tensor& x) { return net.forward(x); }, "norm_net");
  const auto dir = onnx_test_folder("fp16_instance_norm");
  const auto path = dir / "m.onnx";
  export_onnx(net, graph, OnnxExportOptions().precision(OnnxPrecision::kFp16), path);
  EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
  const auto x = torch::rand({1, 3, 12, 12});
  at::Tensor expected;
  {
    torch::NoGradGuard no_grad;
    expected = net.forward(x);
  }
  const auto got = onnx_runtime_forward(path, x, dir);
  if (!got.defined()) return;
  const auto d = onnx_compare(expected, got);
  EXPECT_LE(d.max_abs, 1e-2 * d.scale);
}

TEST(OnnxFp16, FsrcnnAndResnet20MatchFp32WithinOnePercent) {
  for (const char* name : {"fsrcnn", "resnet20_cifar"}) {
    auto m = make(name);
    onnx_randomize_norms(*m);
    m->eval();
    const auto graph = graph_of(m, name);
    const auto dir = onnx_test_folder(std::string("fp16_") + name);
    const auto path = dir / "m.onnx";
    const auto r = export_onnx(
        *m, graph, OnnxExportOptions().dynamic_batch(true).precision(OnnxPrecision::kFp16), path);
    EXPECT_EQ(r.precision, "fp16");
    EXPECT_NO_THROW(onnx::checker::check_model(path.string()));
    const auto model = load_onnx_model(path);
    for (const auto& i : model.graph().initializer())
      if (i.data_type() == onnx::TensorProto::FLOAT)
        ADD_FAILURE() << name << ": float32 initializer " << i.name();
    EXPECT_EQ(model.graph().input(0).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
    const Shape in = m->input_shape();
    torch::manual_seed(3);
    const auto x = torch::rand({2, in[1], in[2], in[3]});
    const auto expected = forward_no_grad(m, x);
    const auto got = onnx_runtime_forward(path, x, dir);
    if (!got.defined()) return;
    const auto d = onnx_compare(expected, got);
    std::printf("[ fp16     ] %s: max |fp32 - fp16| = %.3g (max |y| = %.3g)\n", name, d.max_abs,
                d.scale);
    EXPECT_LE(d.max_abs, 1e-2 * d.scale) << name;
  }
}

}  // namespace igb::deploy

namespace igb::deploy {

namespace {

// fc1 → ReLU → dropout → fc2, as a VGG's classifier.
struct DropoutHeadImpl : torch::nn::Module {
  DropoutHeadImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(16, 8));
    relu = register_module("relu", Activation(ActivationKind::kReLU));
    drop = register_module("drop", torch::nn::Dropout(0.5));
    fc2 = register_module("fc2", torch::nn::Linear(8, 4));
  }
  at::Tensor forward(const at::Tensor& x) { return fc2(drop(relu(fc1(x)))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  Activation relu{nullptr};
  torch::nn::Dropout drop{nullptr};
};
TORCH_MODULE(DropoutHead);

}  // namespace

// A dropout (exported as its input's name) between a quantized ReLU and the next layer carries
// the ReLU's grid: the CPU placement reuses its Q/DQ pair rather than writing a second pair of
// the same names (VGG-16's classifier failed the ONNX checker so).
TEST(OnnxQdq, CpuPlacementCarriesAGridThroughADropout) {
  torch::manual_seed(0);
  DropoutHead m;
  m->eval();
  const std::vector<int64_t> shape = {2, 16};
  auto q = std::make_shared<compress::PostTrainLinearQuantizer>(
      compress::PostTrainOptions::load(
          (fs::path(IGB_SOURCE_DIR) / "schedules/classify/resnet20_ptq_int8.yaml").string()),
      *m, shape, [m](const at::Tensor& x) mutable { return m->forward(x); });
  q->prepare(q->calibrate([&](const auto& f) {
    f(torch::randn({8, 16}));
  }),
             "calibration", nullptr);
  const SummaryGraph::Forward fake = [q](const at::Tensor& x) { return q->forward(x); };
  const auto graph = SummaryGraph::build(*m, shape, fake, "head");
  const auto dir = onnx_test_folder("qdq_cpu_dropout");
  auto calibration = std::make_shared<OnnxCalibration>(calibrate_onnx(
      *m, graph,
      [](const std::function<void(const at::Tensor&)>& f) {
        f(torch::randn({8, 16}));
      },
      "max", 99.99));
  const auto r = export_onnx(*m, graph,
                             OnnxExportOptions()
                                 .precision(OnnxPrecision::kInt8)
                                 .qdq_placement(QdqPlacement::kCpu)
                                 .calibration(calibration),
                             dir / "m.onnx");
  EXPECT_NO_THROW(onnx::checker::check_model((dir / "m.onnx").string()));
  EXPECT_FALSE(r.activation_scales.empty());
  std::set<std::string> outputs;
  const auto model = load_onnx_model(dir / "m.onnx");
  for (const auto& n : model.graph().node())
    for (const auto& o : n.output()) EXPECT_TRUE(outputs.insert(o).second) << o;
}

}  // namespace igb::deploy
