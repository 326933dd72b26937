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

}  // namespace igb
