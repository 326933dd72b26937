#include "core/conv_space_to_depth.h"

#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include "tests/grad_check.h"

namespace igb {

struct S2dCase {
  int64_t cin, cout, kh, kw, h, w, block;
};

class SpaceToDepthConv : public ::testing::TestWithParam<S2dCase> {};

TEST_P(SpaceToDepthConv, MatchesLibTorchInValueAndGradient) {
  const S2dCase c = GetParam();
  torch::manual_seed(c.kh * 100 + c.h);
  auto x = torch::randn({2, c.cin, c.h, c.w}, torch::kFloat64).requires_grad_();
  auto w = torch::randn({c.cout, c.cin, c.kh, c.kw}, torch::kFloat64).requires_grad_();
  auto b = torch::randn({c.cout}, torch::kFloat64).requires_grad_();
  auto ref = torch::conv2d(x, w, b);
  auto ours = conv2d_space_to_depth(x, w, b, c.block);
  test::expect_same_value_and_gradients(ours, ref, {x, w, b}, 1e-10);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SpaceToDepthConv,
    ::testing::Values(S2dCase{16, 3, 7, 7, 22, 22, 2},  // DeblurGAN's last conv, even output
                      S2dCase{4, 3, 7, 7, 13, 16, 2},   // odd output height
                      S2dCase{5, 1, 5, 3, 9, 12, 2},    // non-square kernel, one output
                      S2dCase{3, 2, 9, 9, 20, 17, 3},   // block 3
                      S2dCase{2, 2, 2, 2, 5, 5, 2},     // kernel the size of the block
                      S2dCase{3, 4, 7, 7, 7, 7, 2},     // a single output pixel
                      S2dCase{2, 3, 3, 3, 8, 8, 1}));   // block 1: the plain convolution

TEST(FastConv2d, TakesThePathOnlyWhereItPays) {
  namespace nn = torch::nn;
  EXPECT_TRUE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 3, 7))));
  EXPECT_TRUE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 1, 9).padding(4))));
  EXPECT_FALSE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 3, 3))));
  EXPECT_FALSE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 8, 7))));
  EXPECT_FALSE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 3, 7).stride(2))));
  EXPECT_FALSE(space_to_depth_pays(*nn::Conv2d(nn::Conv2dOptions(16, 3, 7).dilation(2))));
  EXPECT_FALSE(space_to_depth_pays(
      *nn::Conv2d(nn::Conv2dOptions(16, 3, 7).padding(3).padding_mode(torch::kReflect))));
}

TEST(FastConv2d, ModuleWithPaddingGivesTheLayersOutputAndGradients) {
  torch::manual_seed(0);
  torch::nn::Conv2d layer(torch::nn::Conv2dOptions(6, 3, 7).padding(3));
  auto x = torch::randn({2, 6, 15, 12}).requires_grad_();
  auto y = fast_conv2d(*layer, x);
  test::expect_same_value_and_gradients(y, layer->forward(x), {x, layer->weight, layer->bias},
                                        1e-4);
}

TEST(FastConv2d, TracesAsOneConvolution) {
  torch::nn::Conv2d layer(torch::nn::Conv2dOptions(4, 3, 7));
  for (auto& p : layer->parameters()) p.set_requires_grad(false);
  auto x = torch::randn({1, 4, 16, 16});
  auto traced = torch::jit::tracer::trace(
      {x},
      [&](torch::jit::Stack in) -> torch::jit::Stack {
        return {fast_conv2d(*layer, in.at(0).toTensor())};
      },
      [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false);
  int convs = 0, shuffles = 0;
  for (const auto* node : traced.first->graph->nodes()) {
    const std::string kind = node->kind().toQualString();
    convs += kind == "aten::_convolution";
    shuffles += kind == "aten::pixel_shuffle" || kind == "aten::pixel_unshuffle";
  }
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(shuffles, 0);
}

}  // namespace igb
