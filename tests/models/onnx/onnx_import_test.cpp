// The ONNX importer on files the tests write with libonnx's protobuf classes: the modules and
// names a graph becomes, its outputs against LibTorch's own operators, external data, and bad
// files refused in one line.
#include <ATen/Functions.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <filesystem>
#include <fstream>

#include "core/activation.h"
#include "models/model.h"
#include "models/onnx/onnx_tensor.h"
#include "tests/apps/run_support.h"
#include "tests/support.h"

namespace igb::models::onnx_import {
namespace {

namespace fs = std::filesystem;

/// A model of one graph at `opset`, written by the tests.
struct ModelWriter {
  onnx::ModelProto model;
  onnx::GraphProto* g;

  explicit ModelWriter(int64_t opset = 13) {
    model.set_ir_version(8);
    model.set_producer_name("igb tests");
    auto* o = model.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = model.mutable_graph();
    g->set_name("test");
  }

  /// A float input; -1 dims are symbolic, named by `names`.
  void input(const std::string& name, const std::vector<int64_t>& dims,
             const std::vector<std::string>& names = {}) {
    auto* v = g->add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < dims.size(); ++i) {
      auto* d = t->mutable_shape()->add_dim();
      if (dims[i] >= 0)
        d->set_dim_value(dims[i]);
      else
        d->set_dim_param(i < names.size() ? names[i] : "N");
    }
  }

  void output(const std::string& name) {
    auto* v = g->add_output();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape();
  }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::vector<std::string>& out, const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : in) n->add_input(i);
    for (const auto& o : out) n->add_output(o);
    return n;
  }

  onnx::TensorProto* initializer(const std::string& name, const at::Tensor& t) {
    auto* p = g->add_initializer();
    tensor_to_proto(t, name, *p);
    return p;
  }

  std::string write(const fs::path& path) const {
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return path.string();
  }
};

void ints_attr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (auto x : v) a->add_ints(x);
}

void int_attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

/// conv1 (3x3, pads 1) -> Relu -> GlobalAveragePool -> Flatten -> fc (Gemm, transB): a small
/// classifier of 10 classes on 3x8x8 inputs, its weights seeded.
struct SmallNet {
  at::Tensor w1, b1, w2, b2;
  ModelWriter m;
  explicit SmallNet(const std::string& conv_weight = "conv1.weight") {
    at::manual_seed(7);
    w1 = at::randn({4, 3, 3, 3});
    b1 = at::randn({4});
    w2 = at::randn({10, 4});
    b2 = at::randn({10});
    m.input("x", {-1, 3, 8, 8});
    auto* conv = m.node("Conv", {"x", conv_weight, "conv1.bias"}, {"c"}, "conv1");
    ints_attr(conv, "pads", {1, 1, 1, 1});
    ints_attr(conv, "kernel_shape", {3, 3});
    m.node("Relu", {"c"}, {"r"}, "/relu/Relu");
    m.node("GlobalAveragePool", {"r"}, {"p"});
    m.node("Flatten", {"p"}, {"f"});
    int_attr(m.node("Gemm", {"f", "fc.weight", "fc.bias"}, {"y"}, "fc"), "transB", 1);
    m.output("y");
    m.initializer(conv_weight, w1);
    m.initializer("conv1.bias", b1);
    m.initializer("fc.weight", w2);
    m.initializer("fc.bias", b2);
  }
  /// The same network in LibTorch's operators.
  at::Tensor reference(const at::Tensor& x) const {
    const auto h = at::conv2d(x, w1, b1, 1, 1).relu().mean({2, 3});
    return at::linear(h, w2, b2);
  }
};

TEST(OnnxImport, LayersBecomeModulesNamedAfterTheirInitializersAndComputeTheFilesGraph) {
  test::TempDir dir;
  SmallNet net;
  register_builtin_models();
  auto model = create_model("onnx:" + net.m.write(dir.path() / "net.onnx"), {});
  auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("conv1.weight"));
  EXPECT_TRUE(at::equal(params["conv1.weight"], net.w1));
  EXPECT_TRUE(at::equal(params["conv1.bias"], net.b1));
  EXPECT_TRUE(at::equal(params["fc.weight"], net.w2));
  EXPECT_TRUE(at::equal(params["fc.bias"], net.b2));
  EXPECT_EQ(params.size(), 4u);
  auto modules = model->named_modules("", false);
  EXPECT_NE(modules["conv1"]->as<torch::nn::Conv2dImpl>(), nullptr);
  EXPECT_NE(modules["fc"]->as<torch::nn::LinearImpl>(), nullptr);
  ASSERT_TRUE(modules.contains("relu"));
  EXPECT_NE(modules["relu"]->as<ActivationImpl>(), nullptr);
  EXPECT_EQ(model->options_json().value("family", ""), "classify");
  EXPECT_EQ(model->options_json().value("num_classes", 0), 10);
  EXPECT_EQ(model->input_shape(), (std::vector<int64_t>{1, 3, 8, 8}));
  model->eval();
  const auto x = at::randn({5, 3, 8, 8});
  EXPECT_TRUE(at::allclose(model->forward(x), net.reference(x), 1e-5, 1e-5));
}

TEST(OnnxImport, IllegalInitializerNamesAreMadeLegal) {
  test::TempDir dir;
  SmallNet net("onnx::Conv_3");
  register_builtin_models();
  auto model = create_model("onnx:" + net.m.write(dir.path() / "net.onnx"), {});
  auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("onnx__Conv_3.weight"));
  EXPECT_TRUE(at::equal(params["onnx__Conv_3.weight"], net.w1));
}

TEST(OnnxImport, LayersWhoseWeightsTheExporterNamedTakeTheirModuleScope) {
  // PyTorch's exporter folds a batch norm into the conv before it and names the weight itself;
  // the node's name keeps the module's scope.
  test::TempDir dir;
  SmallNet net("onnx::Conv_9");
  net.m.g->mutable_node(0)->set_name("/layer1/layer1.0/conv1/Conv");
  net.m.g->mutable_node(1)->set_name("/layer1/layer1.0/Relu");
  net.m.node("Relu", {"y"}, {"y2"}, "/layer1/layer1.0/Relu_1");
  register_builtin_models();
  auto model = create_model("onnx:" + net.m.write(dir.path() / "net.onnx"), {});
  auto params = model->named_parameters();
  ASSERT_TRUE(params.contains("layer1.0.conv1.weight"));
  EXPECT_TRUE(at::equal(params["layer1.0.conv1.weight"], net.w1));
  const auto modules = model->named_modules();
  EXPECT_TRUE(modules.contains("layer1.0.relu")) << "a functional relu in the block's forward";
}

TEST(OnnxImport, ADropoutExportedForTrainingDropsWhileTheModelTrains) {
  test::TempDir dir;
  ModelWriter m;
  m.input("x", {1, 64, 8, 8});
  m.node("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, "/drop/Dropout");
  m.output("y");
  m.initializer("ratio", at::scalar_tensor(0.5, at::kFloat));
  m.initializer("training", at::scalar_tensor(true, at::kBool));
  register_builtin_models();
  auto model = create_model("onnx:" + m.write(dir.path() / "drop.onnx"), {});
  auto modules = model->named_modules("", false);
  ASSERT_TRUE(modules.contains("drop"));
  EXPECT_NE(modules["drop"]->as<torch::nn::DropoutImpl>(), nullptr);
  at::manual_seed(3);
  const auto x = at::rand({2, 64, 8, 8}) + 1;
  model->eval();
  EXPECT_TRUE(at::equal(model->forward(x), x));
  model->train();
  const double zeros = (model->forward(x) == 0).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(zeros, 0.5, 0.05);
}

TEST(OnnxImport, ExternalDataIsReadFromTheModelsFolder) {
  test::TempDir dir;
  SmallNet net;
  auto* w = net.m.g->mutable_initializer(0);
  std::ofstream(dir.path() / "weights.bin", std::ios::binary)
      << std::string(8, 'x') << w->raw_data();
  const size_t bytes = w->raw_data().size();
  w->clear_raw_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  entry("location", "weights.bin");
  entry("offset", "8");
  entry("length", std::to_string(bytes));
  register_builtin_models();
  auto model = create_model("onnx:" + net.m.write(dir.path() / "net.onnx"), {});
  EXPECT_TRUE(at::equal(model->named_parameters()["conv1.weight"], net.w1));

  // Outside the model's folder, or missing: one line each.
  w->mutable_external_data(0)->set_value("../weights.bin");
  const auto outside = net.m.write(dir.path() / "outside.onnx");
  EXPECT_NE(test::input_error_of([&] {
              create_model("onnx:" + outside, {});
            }).find("lies outside the model's folder"),
            std::string::npos);
  w->mutable_external_data(0)->set_value("gone.bin");
  const auto missing = net.m.write(dir.path() / "missing.onnx");
  EXPECT_NE(test::input_error_of([&] { create_model("onnx:" + missing, {}); }).find("is missing"),
            std::string::npos);
}

TEST(OnnxImport, BadFilesAreRefusedInOneLine) {
  test::TempDir dir;
  register_builtin_models();
  auto error = [&](const std::string& path) {
    return test::input_error_of([&] { create_model("onnx:" + path, {}); });
  };
  const auto expect = [&](const std::string& path, const std::string& part) {
    const std::string e = error(path);
    EXPECT_NE(e.find(part), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  };
  SmallNet net;
  const std::string bytes = net.m.model.SerializeAsString();
  std::ofstream(dir.path() / "cut.onnx", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect((dir.path() / "cut.onnx").string(), "not an ONNX model, or a truncated one");
  std::ofstream(dir.path() / "text.onnx") << "hello, this is not a model\n";
  expect((dir.path() / "text.onnx").string(), "not an ONNX model");
  expect((dir.path() / "absent.onnx").string(), "no such file");

  SmallNet unknown;
  unknown.m.node("NonMaxSuppression", {"y"}, {"z"}, "nms");
  expect(unknown.m.write(dir.path() / "unknown.onnx"),
         "igb does not import NonMaxSuppression (node 'nms' (NonMaxSuppression))");

  SmallNet ghost;
  ghost.m.node("Add", {"y", "ghost"}, {"z"}, "add");
  expect(ghost.m.write(dir.path() / "ghost.onnx"),
         "node 'add' (Add) reads 'ghost', which no node, graph input or initializer defines");

  ModelWriter cycle;
  cycle.input("x", {1, 3, 4, 4});
  cycle.node("Add", {"x", "b"}, {"a"}, "first");
  cycle.node("Relu", {"a"}, {"b"}, "second");
  cycle.output("b");
  expect(cycle.write(dir.path() / "cycle.onnx"), "its nodes form a cycle");

  ModelWriter huge;
  huge.input("x", {1, 3, int64_t{1} << 40, 4});
  huge.node("Relu", {"x"}, {"y"});
  huge.output("y");
  expect(huge.write(dir.path() / "huge.onnx"), "dimension 1099511627776 is out of range");

  // No element, but strides past 2^63 (found by the onnx fuzz target): refused, not computed.
  SmallNet empty;
  auto* w = empty.m.g->add_initializer();
  w->set_name("empty");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {int64_t{0}, kMaxDimension, kMaxDimension, kMaxDimension}) w->add_dims(d);
  expect(empty.m.write(dir.path() / "empty.onnx"),
         "initializer 'empty': 4-D tensor has more than 2^31 elements");

  ModelWriter symbolic;
  symbolic.input("x", {-1, 3, -1, -1}, {"N", "", "H", "W"});
  symbolic.node("Relu", {"x"}, {"y"});
  symbolic.output("y");
  const auto sym = symbolic.write(dir.path() / "symbolic.onnx");
  expect(
      sym,
      "has symbolic dimensions (height 'H', width 'W'); give them with --model-arg input_size=N");
  // Given the size, it imports.
  auto model = create_model("onnx:" + sym, {{"input_size", 16}});
  EXPECT_EQ(model->input_shape(), (std::vector<int64_t>{1, 3, 16, 16}));
}

// Early exits at an imported classifier's activations (docs/early-exit.md), named as the file's
// ReLU nodes are: trained with Distiller's loss weights, calibrated and measured by early-exit; a
// checkpoint rebuilds the heads. Exits on a file of another family are refused in one line.
TEST(OnnxImport, EarlyExitsAttachAtTheFilesActivationsAndCalibrate) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  auto r = test::run_app("igb-tools export-onnx --model resnet20_cifar --out " +
                         (dir / "r20.onnx").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string model = "onnx:" + (dir / "r20.onnx").string();
  r = test::run_app("igb-train --optform=classify --model " + model +
                    " --model-arg exits=layer1_2_relu2 --earlyexit_lossweights 0.3 "
                    "--synthetic-train 32 --synthetic-val 16 --batch-size 16 --threads 1 "
                    "--seed 3 --epochs 1 --out " +
                    (dir / "run").string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = test::run_app("igb-tools early-exit --checkpoint " +
                    (dir / "run" / "checkpoint.ckpt").string() +
                    " --data synthetic --max-samples 200 --repeats 1 --threads 1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find(" layer1_2_relu2 |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decisions of the cascade that differ from every exit computed on "
                          "every sample: 0"),
            std::string::npos)
      << r.output;
  r = test::run_app("igb-tools summary --model " + model +
                    " --model-arg family=model --model-arg exits=layer1_2_relu2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("model arg 'exits' is family classify's; this model's family is model"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace igb::models::onnx_import
