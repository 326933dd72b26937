#include "core/activation.h"

#include <gtest/gtest.h>

namespace igb {

namespace {
// A stand-in for a quantizer's replacement: clamps to [0, 1].
struct ClampImpl : torch::nn::Module {
  torch::Tensor forward(const torch::Tensor& x) { return x.clamp(0, 1); }
};
TORCH_MODULE(Clamp);
}  // namespace

TEST(Activation, PReLUSlopeIsNamedWeight) {
  torch::nn::Sequential seq(
      torch::nn::Linear(2, 3),
      Activation(ActivationOptions(ActivationKind::kPReLU).num_parameters(3)));
  auto params = seq->named_parameters();
  ASSERT_TRUE(params.contains("1.weight"));
  EXPECT_EQ(params["1.weight"].sizes(), torch::IntArrayRef({3}));
  EXPECT_FLOAT_EQ(params["1.weight"][0].item<float>(), 0.25f);
}

TEST(Activation, ReplacementChangesOutputInsideSequential) {
  torch::manual_seed(0);
  auto act = Activation(ActivationKind::kReLU);
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), act);
  auto x = torch::randn({8, 4}) * 4;
  auto before = seq->forward(x);
  EXPECT_GT(before.max().item<float>(), 1.0f);  // ReLU leaves large values
  act->replace(torch::nn::AnyModule(Clamp()));
  auto after = seq->forward(x);
  EXPECT_LE(after.max().item<float>(), 1.0f);
  EXPECT_FALSE(torch::allclose(before, after));
  EXPECT_TRUE(torch::allclose(after, before.clamp(0, 1)));
  act->restore();
  EXPECT_TRUE(torch::equal(seq->forward(x), before));
}

TEST(Activation, Kinds) {
  auto x = torch::tensor({-2.0f, -0.5f, 0.0f, 1.5f});
  EXPECT_TRUE(torch::equal(Activation(ActivationKind::kReLU)(x), torch::relu(x)));
  EXPECT_TRUE(torch::allclose(Activation(ActivationKind::kTanh)(x), torch::tanh(x)));
  auto leaky = Activation(ActivationOptions(ActivationKind::kLeakyReLU).negative_slope(0.1));
  EXPECT_FLOAT_EQ(leaky(x)[0].item<float>(), -0.2f);
  auto prelu = Activation(ActivationKind::kPReLU);
  EXPECT_FLOAT_EQ(prelu(x)[1].item<float>(), -0.125f);
  auto relu6 = Activation(ActivationKind::kReLU6);
  EXPECT_TRUE(
      torch::equal(relu6(torch::tensor({-1.0f, 3.0f, 7.0f})), torch::tensor({0.0f, 3.0f, 6.0f})));
}

TEST(Activation, InPlaceOverwritesItsInputAndKeepsGradients) {
  auto inplace = Activation(ActivationOptions(ActivationKind::kReLU).inplace(true));
  auto w = torch::tensor({-1.0f, 2.0f}, torch::requires_grad());
  auto h = w * 3;  // a fresh intermediate, as after a conv
  auto y = inplace(h);
  EXPECT_TRUE(torch::equal(h, torch::tensor({0.0f, 6.0f})));  // the input itself was rectified
  y.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({0.0f, 3.0f})));
}

}  // namespace igb
