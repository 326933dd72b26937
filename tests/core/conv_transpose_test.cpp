#include "core/conv_transpose.h"

#include <gtest/gtest.h>

#include "tests/grad_check.h"

namespace igb {

struct Case {
  int64_t cin, cout, k, stride, pad, out_pad, h, w;
};

class SubpixelConvTranspose : public ::testing::TestWithParam<Case> {};

TEST_P(SubpixelConvTranspose, MatchesLibTorchInValueAndGradient) {
  const Case c = GetParam();
  torch::manual_seed(c.k * 100 + c.stride);
  auto x = torch::randn({2, c.cin, c.h, c.w}, torch::kFloat64).requires_grad_();
  auto w = torch::randn({c.cin, c.cout, c.k, c.k}, torch::kFloat64).requires_grad_();
  auto b = torch::randn({c.cout}, torch::kFloat64).requires_grad_();
  std::vector<int64_t> s{c.stride, c.stride}, p{c.pad, c.pad}, op{c.out_pad, c.out_pad};
  auto ref = torch::conv_transpose2d(x, w, b, s, p, op);
  auto ours = conv_transpose2d_subpixel(x, w, b, s, p, op);
  test::expect_same_value_and_gradients(ours, ref, {x, w, b}, 1e-10);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SubpixelConvTranspose,
    ::testing::Values(Case{6, 1, 9, 3, 4, 2, 7, 5},    // FSRCNN x3
                      Case{6, 1, 9, 2, 4, 1, 6, 6},    // FSRCNN x2
                      Case{6, 3, 9, 4, 4, 3, 5, 8},    // FSRCNN x4, RGB
                      Case{4, 5, 3, 2, 1, 1, 6, 6},    // DeblurGAN-style upsampling
                      Case{3, 2, 4, 2, 0, 0, 5, 4},    // kernel a multiple of the stride
                      Case{3, 2, 5, 1, 2, 0, 6, 6},    // stride 1
                      Case{2, 2, 3, 3, 0, 2, 4, 4}));  // output padding past the kernel

TEST(FastConvTranspose, ModuleUsesTheSameParameters) {
  torch::manual_seed(0);
  torch::nn::ConvTranspose2d layer(
      torch::nn::ConvTranspose2dOptions(8, 1, 9).stride(3).padding(4).output_padding(2));
  auto x = torch::randn({1, 8, 10, 12});
  auto y = fast_conv_transpose2d(*layer, x);
  EXPECT_EQ(y.sizes(), torch::IntArrayRef({1, 1, 30, 36}));
  EXPECT_TRUE(torch::allclose(y, layer->forward(x), 1e-5, 1e-5));
}

}  // namespace igb
