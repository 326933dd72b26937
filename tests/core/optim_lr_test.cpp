#include "core/optim_lr.h"

#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

namespace igb {

namespace {

// Two parameter groups with different learning rates.
template <class Optimizer, class Options>
Optimizer two_groups(const Options& first, const Options& second) {
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{torch::zeros({2}, torch::requires_grad())},
                      std::make_unique<Options>(first));
  groups.emplace_back(std::vector<torch::Tensor>{torch::zeros({3}, torch::requires_grad())},
                      std::make_unique<Options>(second));
  return Optimizer(std::move(groups), first);
}

template <class Optimizer>
std::vector<double> lrs(const Optimizer& opt) {
  std::vector<double> out;
  for (const auto& g : opt.param_groups()) out.push_back(g.options().get_lr());
  return out;
}

}  // namespace

TEST(OptimLr, SetsEveryGroupOfSgd) {
  auto opt = two_groups<torch::optim::SGD>(torch::optim::SGDOptions(0.1).momentum(0.9),
                                           torch::optim::SGDOptions(0.2));
  EXPECT_EQ(lrs(opt), (std::vector<double>{0.1, 0.2}));
  EXPECT_DOUBLE_EQ(get_lr(opt), 0.1);
  set_lr(opt, 0.025);
  EXPECT_EQ(lrs(opt), (std::vector<double>{0.025, 0.025}));
  EXPECT_DOUBLE_EQ(get_lr(opt), 0.025);
  // Other options are untouched.
  EXPECT_DOUBLE_EQ(
      static_cast<const torch::optim::SGDOptions&>(opt.param_groups()[0].options()).momentum(),
      0.9);
}

TEST(OptimLr, SetsEveryGroupOfAdamAndAdamW) {
  auto adam = two_groups<torch::optim::Adam>(torch::optim::AdamOptions(1e-3),
                                             torch::optim::AdamOptions(2e-3));
  set_lr(adam, 5e-4);
  EXPECT_EQ(lrs(adam), (std::vector<double>{5e-4, 5e-4}));
  EXPECT_DOUBLE_EQ(get_lr(adam), 5e-4);

  auto adamw = two_groups<torch::optim::AdamW>(torch::optim::AdamWOptions(1e-3),
                                               torch::optim::AdamWOptions(3e-3));
  set_lr(adamw, 7e-4);
  EXPECT_EQ(lrs(adamw), (std::vector<double>{7e-4, 7e-4}));
}

TEST(OptimLr, TheStepUsesTheNewRate) {
  auto p = torch::ones({1}, torch::requires_grad());
  torch::optim::SGD opt(std::vector<torch::Tensor>{p}, torch::optim::SGDOptions(1.0));
  set_lr(opt, 0.25);
  p.mutable_grad() = torch::full({1}, 2.0);
  opt.step();
  EXPECT_FLOAT_EQ(p.item<float>(), 1.0f - 0.25f * 2.0f);
}

}  // namespace igb
