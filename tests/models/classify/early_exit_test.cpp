#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "models/classify/early_exit.h"
#include "models/model.h"
#include "tools/graph/summary_graph.h"

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
  const auto g = tools::SummaryGraph::build(
      *m, {4, 3, 32, 32}, [&](const torch::Tensor& t) { return m->forward(t); }, "ee");
  const int relu = g.op(g.index("layer1.2.relu2")).outputs[0];
  at::Tensor branch_input;
  tools::replay_trace(g, x, [&](int v, at::Tensor& t) {
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
    return tools::SummaryGraph::build(
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

}  // namespace
}  // namespace igb::models::classify
