#include "core/train_mode_guard.h"

#include <gtest/gtest.h>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>

#include <stdexcept>

namespace igb {

namespace {
torch::nn::Sequential net() {
  return torch::nn::Sequential(torch::nn::Linear(2, 2), torch::nn::Dropout(0.5));
}
}  // namespace

TEST(TrainModeGuard, SetsTheModeAndRestoresIt) {
  auto m = net();
  m->train();
  {
    TrainModeGuard g(*m, false);
    EXPECT_TRUE(g.was_training());
    EXPECT_FALSE(m->is_training());
    for (const auto& child : m->children()) EXPECT_FALSE(child->is_training());
  }
  EXPECT_TRUE(m->is_training());
  for (const auto& child : m->children()) EXPECT_TRUE(child->is_training());

  m->eval();
  {
    TrainModeGuard g(*m, true);
    EXPECT_TRUE(m->is_training());
  }
  EXPECT_FALSE(m->is_training());
  EXPECT_FALSE(m[1]->is_training());
}

TEST(TrainModeGuard, RestoresTheModeWhenAnExceptionLeavesTheScope) {
  auto m = net();
  m->train();
  try {
    TrainModeGuard g(*m, false);
    throw std::runtime_error("evaluation failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(m->is_training());
  EXPECT_TRUE(m[1]->is_training());
}

TEST(FrozenParameters, BackwardReachesTheInputNotTheWeightsAndFlagsComeBack) {
  torch::manual_seed(0);
  auto m = net();
  m->eval();
  auto bias = m->named_parameters()["0.bias"];
  bias.set_requires_grad(false);  // a parameter frozen before keeps its own flag
  auto x = torch::randn({3, 2}).requires_grad_();
  at::Tensor y;
  {
    FrozenParameters frozen(*m);
    for (const auto& p : m->parameters()) EXPECT_FALSE(p.requires_grad());
    y = m->forward(x).sum();
  }
  y.backward();
  ASSERT_TRUE(x.grad().defined());
  // d(sum(W x + b))/dx is the column sums of W for every row.
  const auto weight = m->named_parameters()["0.weight"];
  EXPECT_TRUE(torch::allclose(x.grad(), weight.sum(0).expand({3, 2})));
  EXPECT_FALSE(weight.grad().defined());
  EXPECT_TRUE(weight.requires_grad());
  EXPECT_FALSE(bias.requires_grad());
}

}  // namespace igb
