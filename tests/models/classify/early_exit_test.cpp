#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "graph/summary_graph.h"
#include "models/classify/early_exit.h"
#include "models/model.h"

namespace igb::models::classify {
namespace {

Model make(const std::string& name) {
  register_builtin_models();
  torch::manual_seed(0);
  return create_model(name, {});
}

TEST(EarlyExit, DistillersResnetCifarExitHasItsShapeAndNames) {
  auto m = make("resnet20_cifar_earlyexit");
  const auto params = m->named_parameters();
  // Distiller's BranchPoint names: the head is `branch_net` of the activation it follows.
  ASSERT_TRUE(params.contains("layer1.2.relu2.branch_net.2.weight"));
  EXPECT_EQ(params["layer1.2.relu2.branch_net.2.weight"].sizes(), (c10::IntArrayRef{10, 1600}));
  EXPECT_TRUE(params.contains("layer1.2.relu2.branch_net.2.bias"));
  // Everything else is resnet20_cifar's, unchanged.
  auto plain = make("resnet20_cifar");
  EXPECT_EQ(params.size(), plain->named_parameters().size() + 2);
  const auto points = exit_points(*m);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].first, "layer1.2.relu2");
}

TEST(EarlyExit, ForwardExitsGivesEachExitThenTheFinalOutput) {
  auto m = make("resnet20_cifar_earlyexit");
  m->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::rand({4, 3, 32, 32});
  const auto outs = forward_exits(
      *m, [&](const at::Tensor& t) { return m->forward(t); }, x);
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].sizes(), (c10::IntArrayRef{4, 10}));
  // The final exit is the plain forward; the exit is its head on layer1's output, by hand.
  EXPECT_TRUE(torch::equal(outs[1], m->forward(x)));
  // layer1.2.relu2's output, from a replay of the traced backbone.
  const auto g = graph::SummaryGraph::build(
      *m, {4, 3, 32, 32}, [&](const torch::Tensor& t) { return m->forward(t); }, "ee");
  const int relu = g.op(g.index("layer1.2.relu2")).outputs[0];
  at::Tensor branch_input;
  graph::replay_trace(g, x, [&](int v, at::Tensor& t) {
    if (v == relu) branch_input = t.clone();
  });
  ASSERT_TRUE(branch_input.defined());
  const at::Tensor w = m->named_parameters()["layer1.2.relu2.branch_net.2.weight"];
  const at::Tensor b = m->named_parameters()["layer1.2.relu2.branch_net.2.bias"];
  const auto by_hand = torch::linear(torch::avg_pool2d(branch_input, 3).flatten(1), w, b);
  EXPECT_TRUE(torch::allclose(outs[0], by_hand, 1e-5, 1e-6));
}

TEST(EarlyExit, HeadsAreOffOutsideForwardExits) {
  // Tracing, MACs, export and the final-exit forward see the backbone alone.
  auto m = make("resnet20_cifar_earlyexit");
  auto plain = make("resnet20_cifar");
  auto graph = [](Model& model, const std::string& name) {
    return graph::SummaryGraph::build(
        *model, {1, 3, 32, 32}, [&](const torch::Tensor& x) { return model->forward(x); }, name);
  };
  const auto ee = graph(m, "ee");
  const auto base = graph(plain, "plain");
  EXPECT_EQ(ee.total_macs(), base.total_macs());
  ASSERT_EQ(ee.ops().size(), base.ops().size());
  // The branch point keeps its op name although its module now has a child.
  for (size_t i = 0; i < ee.ops().size(); ++i) EXPECT_EQ(ee.ops()[i].name, base.ops()[i].name);
}

TEST(EarlyExit, TrainingThroughAnExitReachesTheBackbone) {
  auto m = make("resnet20_cifar_earlyexit");
  m->train();
  const auto x = torch::rand({2, 3, 32, 32});
  const auto outs = forward_exits(
      *m, [&](const at::Tensor& t) { return m->forward(t); }, x);
  // Only the exit's loss: gradients reach layer1 and the head, not layer3.
  outs[0].sum().backward();
  auto params = m->named_parameters();
  EXPECT_GT(params["layer1.0.conv1.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_GT(params["layer1.2.relu2.branch_net.2.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_FALSE(params["layer3.0.conv1.weight"].grad().defined() &&
               params["layer3.0.conv1.weight"].grad().abs().sum().item<double>() > 0);
}

TEST(EarlyExit, AnExitMustFollowAnActivation) {
  auto m = make("resnet20_cifar");
  torch::nn::Sequential head{torch::nn::Flatten()};
  try {
    attach_exits(*m, {ExitSpec{"layer1.2.conv2", head}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer1.2.relu2"), std::string::npos) << e.what();
  }
}

TEST(EarlyExit, DistillersResnet50ExitsHaveTheirShapes) {
  register_builtin_models();
  auto m = create_model("resnet50_earlyexit", {{"input_size", 224}});
  const auto p = m->named_parameters();
  // Distiller's Linear(1960) and Linear(588) at 224x224, conv heads 256→10 and 512→12.
  EXPECT_EQ(p["layer1.2.relu3.branch_net.0.weight"].sizes(), (c10::IntArrayRef{10, 256, 7, 7}));
  EXPECT_EQ(p["layer1.2.relu3.branch_net.3.weight"].sizes(), (c10::IntArrayRef{1000, 1960}));
  EXPECT_EQ(p["layer2.3.relu3.branch_net.0.weight"].sizes(), (c10::IntArrayRef{12, 512, 7, 7}));
  EXPECT_EQ(p["layer2.3.relu3.branch_net.3.weight"].sizes(), (c10::IntArrayRef{1000, 588}));
  // At 64x64 the same heads fit the smaller maps.
  auto small = create_model("resnet50_earlyexit", {{"input_size", 64}, {"num_classes", 10}});
  small->eval();
  torch::NoGradGuard no_grad;
  const auto outs = forward_exits(
      *small, [&](const at::Tensor& t) { return small->forward(t); }, torch::rand({2, 3, 64, 64}));
  ASSERT_EQ(outs.size(), 3u);
  for (const auto& o : outs) EXPECT_EQ(o.sizes(), (c10::IntArrayRef{2, 10}));
}

TEST(EarlyExit, AnyClassifierTakesExitsAsModelArgsAndKeepsThemInItsOptions) {
  register_builtin_models();
  torch::manual_seed(0);
  auto m = create_model("resnet56_cifar",
                        {{"exits", "layer1.8.relu2,layer2.8.relu2"}, {"exit_pool", "3"}});
  const auto p = m->named_parameters();
  EXPECT_EQ(p["layer1.8.relu2.branch_net.2.weight"].sizes(), (c10::IntArrayRef{10, 16 * 9}));
  EXPECT_EQ(p["layer2.8.relu2.branch_net.2.weight"].sizes(), (c10::IntArrayRef{10, 32 * 9}));
  const auto opts = m->options_json();
  EXPECT_EQ(opts["exits"], "layer1.8.relu2,layer2.8.relu2");
  EXPECT_EQ(opts["exit_pool"], 3);
  // A checkpoint rebuilds the same model from its options.
  auto again = create_model("resnet56_cifar", opts);
  EXPECT_EQ(again->named_parameters().size(), p.size());
  EXPECT_EQ(exit_points(*again).size(), 2u);
  // Without exits the options are the architecture's alone.
  EXPECT_FALSE(create_model("resnet20_cifar", {})->options_json().contains("exits"));
  EXPECT_THROW(create_model("resnet20_cifar", {{"exits", "layer1.2.conv2"}}), InputError);
  EXPECT_THROW(create_model("resnet20_cifar", {{"exit_pool", 2}}), InputError);
  EXPECT_THROW(create_model("resnet20_cifar", {{"exits", "fc"}}), InputError);
}

TEST(EarlyExit, InceptionV3CifarHasTheCascadesFourExits) {
  register_builtin_models();
  torch::manual_seed(0);
  auto m = create_model("inception_v3_cifar_earlyexit", {});
  const auto points = exit_points(*m);
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[0].first, "after4");
  EXPECT_EQ(points[3].first, "after16");
  const auto p = m->named_parameters();
  // torchvision's names; pooled heads on 64, 256, 768 and 1280 channels.
  EXPECT_TRUE(p.contains("Mixed_5b.branch5x5_2.conv.weight"));
  EXPECT_TRUE(p.contains("Mixed_7c.branch3x3dbl_3b.bn.weight"));
  EXPECT_EQ(p["after4.branch_net.2.weight"].sizes(), (c10::IntArrayRef{10, 256}));
  EXPECT_EQ(p["after16.branch_net.2.weight"].sizes(), (c10::IntArrayRef{10, 5120}));
  m->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::rand({2, 3, 32, 32});
  const auto outs = forward_exits(
      *m, [&](const at::Tensor& t) { return m->forward(t); }, x);
  ASSERT_EQ(outs.size(), 5u);
  for (const auto& o : outs) EXPECT_EQ(o.sizes(), (c10::IntArrayRef{2, 10}));
  // The branch points change nothing: the plain network with the same weights gives the same.
  torch::manual_seed(0);
  auto plain = create_model("inception_v3_cifar", {});
  plain->eval();
  auto dst = plain->named_parameters();
  for (const auto& item : p)
    if (dst.contains(item.key())) dst[item.key()].copy_(item.value());
  EXPECT_TRUE(torch::allclose(plain->forward(x), outs.back(), 1e-5, 1e-5));
}

TEST(EarlyExit, DistillersLossWeighsEachExitAndGivesTheFinalTheRest) {
  // Two early exits and the final one, 3 samples of 4 classes; the loss by hand.
  const auto e0 = torch::tensor({{2.0, 0.0, 0.0, 0.0}, {0.0, 1.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 3.0}});
  const auto e1 = torch::tensor({{0.5, 0.0, 0.0, 0.0}, {0.0, 0.0, 2.0, 0.0}, {1.0, 1.0, 1.0, 1.0}});
  const auto fin =
      torch::tensor({{4.0, 0.0, 0.0, 0.0}, {0.0, 4.0, 0.0, 0.0}, {0.0, 0.0, 0.0, 4.0}});
  const auto target = torch::tensor({0, 1, 3}, torch::kLong);
  // CE of logits z for class t: log Σ exp(z) − z_t.
  const auto ce = [](const std::vector<std::vector<double>>& z, const std::vector<int>& t) {
    double sum = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      double s = 0;
      for (double v : z[i]) s += std::exp(v);
      sum += std::log(s) - z[i][static_cast<size_t>(t[i])];
    }
    return sum / static_cast<double>(z.size());
  };
  const double ce0 = ce({{2, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 0, 3}}, {0, 1, 3});
  const double ce1 = ce({{0.5, 0, 0, 0}, {0, 0, 2, 0}, {1, 1, 1, 1}}, {0, 1, 3});
  const double cef = ce({{4, 0, 0, 0}, {0, 4, 0, 0}, {0, 0, 0, 4}}, {0, 1, 3});
  const double loss = earlyexit_loss({e0, e1, fin}, target, {0.3, 0.2}).item<double>();
  EXPECT_NEAR(loss, 0.3 * ce0 + 0.2 * ce1 + 0.5 * cef, 1e-6);
  EXPECT_NEAR(earlyexit_loss({e0, e1, fin}, target, {0.0, 0.0}).item<double>(), cef, 1e-6);
}

TEST(EarlyExit, DistillersOptionsAreCheckedAgainstTheExits) {
  const auto message = [](const std::vector<double>& w, const std::vector<double>& t,
                          size_t exits) {
    try {
      check_earlyexit_options("resnet20_cifar_earlyexit", exits, w, t);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(message({0.3}, {0.8}, 1), "");
  EXPECT_NE(message({0.6, 0.4}, {}, 2).find("less than 1"), std::string::npos);
  EXPECT_NE(message({0.5, 0.6}, {}, 2).find("sum to 1.100"), std::string::npos);
  EXPECT_NE(message({0.3, 0.2}, {}, 1).find("give 1 weight"), std::string::npos);
  EXPECT_NE(message({}, {}, 1).find("--earlyexit_lossweights"), std::string::npos);
  EXPECT_NE(message({-0.1}, {}, 1).find("at least 0"), std::string::npos);
  EXPECT_NE(message({0.3}, {0.5, 0.5}, 1).find("--earlyexit_thresholds"), std::string::npos);
  EXPECT_NE(message({0.3}, {}, 0).find("has no early exits"), std::string::npos);
}

TEST(EarlyExit, DistillersReportCountsEachSampleAtItsFirstExitBelowTheThreshold) {
  // One early exit and the final one; 4 samples of 3 classes.
  const auto e0 =
      torch::tensor({{5.0, 0.0, 0.0}, {0.0, 0.0, 5.0}, {0.0, 0.2, 0.0}, {0.0, 0.0, 0.1}});
  const auto fin =
      torch::tensor({{3.0, 0.0, 0.0}, {0.0, 3.0, 0.0}, {0.0, 0.0, 3.0}, {3.0, 0.0, 0.0}});
  const auto target = torch::tensor({0, 1, 1, 2}, torch::kLong);
  // CE at exit 0: sample 0 ≈ 0.013 (leaves), 1 ≈ 5.01, 2 ≈ 0.97, 3 ≈ 1.03: with threshold 1.0,
  // samples 0 and 2 leave at exit 0 (both right), 1 and 3 go on to the final exit (1 right, 3
  // wrong).
  DistillerExitStats stats(1, {1.0});
  stats.add({e0, fin}, target);
  const auto ex = stats.exits();
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].taken, 2);
  EXPECT_EQ(ex[1].taken, 2);
  EXPECT_DOUBLE_EQ(ex[0].top1, 100.0);
  EXPECT_DOUBLE_EQ(ex[1].top1, 50.0);
  EXPECT_DOUBLE_EQ(ex[0].top1_all, 75.0);  // only sample 1 is wrong at exit 0
  EXPECT_DOUBLE_EQ(stats.top1(), 75.0);
  EXPECT_DOUBLE_EQ(ex[0].top5, 100.0);  // 3 classes: top-3 holds every label
  const auto lines = stats.report();
  EXPECT_EQ(lines[0], "Exit 0: 2");
  EXPECT_EQ(lines[2], "Percent Early Exit 0: 50.000");
  // No thresholds: every sample leaves at the final exit.
  DistillerExitStats final_only(1, {});
  final_only.add({e0, fin}, target);
  EXPECT_EQ(final_only.exits()[1].taken, 4);
  EXPECT_DOUBLE_EQ(final_only.top1(), 50.0);
}

}  // namespace
}  // namespace igb::models::classify
