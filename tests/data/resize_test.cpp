#include "data/resize.h"

#include <gtest/gtest.h>
#include <torch/nn/functional/upsampling.h>

namespace igb::data {

namespace F = torch::nn::functional;

TEST(Imresize, RowsSumToOneAndConstantsStay) {
  for (double scale : {1.0 / 4, 1.0 / 3, 1.0 / 2, 2.0, 3.0}) {
    int64_t in = 12, out = static_cast<int64_t>(std::ceil(in * scale - 1e-9));
    auto m = bicubic_resize_matrix(in, out, scale);
    EXPECT_TRUE(torch::allclose(m.sum(1), torch::ones({out}), 1e-5, 1e-5)) << scale;
  }
  auto flat = torch::full({3, 12, 12}, 0.42f);
  EXPECT_TRUE(torch::allclose(imresize(flat, 1.0 / 3), torch::full({3, 4, 4}, 0.42f), 1e-5, 1e-5));
  EXPECT_EQ(imresize(flat, 3.0).sizes(), torch::IntArrayRef({3, 36, 36}));
}

TEST(Imresize, UpscalingReproducesLinearRampsAwayFromBorders) {
  // Cubic convolution with a = -0.5 is exact on linear functions.
  auto ramp =
      torch::arange(16, torch::kFloat32).reshape({1, 1, 16}).expand({1, 16, 16}).contiguous();
  auto up = imresize(ramp, 2.0);
  // Output x (0-based) samples the input at (x + 0.5) / 2 - 0.5.
  for (int64_t x = 6; x < 24; ++x)
    EXPECT_NEAR(up[0][10][x].item<float>(), (x + 0.5) / 2 - 0.5, 1e-4) << x;
}

TEST(Imresize, DownscaleMatchesLibTorchAntialiasedBicubicInTheInterior) {
  // LibTorch's antialiased bicubic uses the same widened a = -0.5 kernel and pixel-centre
  // alignment; only the border handling differs (it renormalises, MATLAB reflects).
  torch::manual_seed(4);
  auto img = torch::rand({1, 1, 48, 48});
  auto ours = imresize(img, 1.0 / 3);
  auto theirs = F::interpolate(img, F::InterpolateFuncOptions()
                                        .size(std::vector<int64_t>{16, 16})
                                        .mode(torch::kBicubic)
                                        .align_corners(false)
                                        .antialias(true));
  using torch::indexing::Slice;
  auto inner = Slice(2, 14);
  EXPECT_TRUE(torch::allclose(ours.index({0, 0, inner, inner}), theirs.index({0, 0, inner, inner}),
                              1e-4, 1e-4));
}

TEST(Imresize, SymmetricBorderReflection) {
  // Row weights near the border fold back onto the first pixels (MATLAB's symmetric padding).
  auto m = bicubic_resize_matrix(6, 12, 2.0);
  // First output pixel samples x = -0.25 (0-based): taps at -1.75, -0.75, 0.25, 1.25 from it
  // reflect onto pixels 1, 0, 0, 1: w0 = k(0.75) + k(0.25), w1 = k(1.75) + k(1.25).
  EXPECT_NEAR(m[0][0].item<float>(), 0.2265625 + 0.8671875, 1e-6);
  EXPECT_NEAR(m[0][1].item<float>(), -0.0234375 - 0.0703125, 1e-6);
  EXPECT_NEAR(m[0].sum().item<float>(), 1.0f, 1e-6);
  EXPECT_EQ(m[0].slice(0, 3).abs().sum().item<float>(), 0.0f);
}

}  // namespace igb::data
