#include "data/synthetic_images.h"

#include <gtest/gtest.h>

#include "data/motion_blur.h"
#include "data/synthetic_shapes.h"

namespace igb::data {

TEST(SyntheticImages, DeterministicBySeed) {
  auto a = render_synthetic_image(64, 80, 7);
  auto b = render_synthetic_image(64, 80, 7);
  auto c = render_synthetic_image(64, 80, 8);
  EXPECT_EQ(a.sizes(), torch::IntArrayRef({3, 64, 80}));
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_FALSE(torch::equal(a, c));
}

TEST(SyntheticImages, InRangeWithDetailAndFlatAreas) {
  for (uint64_t seed = 0; seed < 6; ++seed) {
    auto img = render_synthetic_image(96, 96, seed);
    EXPECT_GE(img.min().item<float>(), 0.0f);
    EXPECT_LE(img.max().item<float>(), 1.0f);
    EXPECT_GT(img.std().item<float>(), 0.05f) << seed;
    // Edges: a share of strong horizontal gradients, but not everywhere (flat regions exist).
    auto grad = (img.slice(2, 1) - img.slice(2, 0, -1)).abs().amax(0);
    double strong = (grad > 0.1).to(torch::kFloat64).mean().item<double>();
    EXPECT_GT(strong, 0.005) << seed;
    EXPECT_LT(strong, 0.6) << seed;
  }
}

/// A sum and a position-weighted sum: equal draws in another order move the second.
std::pair<double, double> fingerprint(const at::Tensor& t) {
  auto v = t.to(torch::kFloat64).flatten();
  auto w = torch::arange(v.numel(), torch::kFloat64).remainder(97) + 1;
  return {v.sum().item<double>(), (v * w).sum().item<double>()};
}

TEST(SyntheticImages, TheSameDataWhateverTheCompiler) {
  // The generators draw in one fixed order, whatever order a compiler evaluates a call's
  // arguments in; these sums are those of the data every published figure was measured on.
  const std::vector<std::pair<at::Tensor, std::pair<double, double>>> cases = {
      {render_synthetic_image(144, 144, 1), {30332.36862, 1487991.573}},
      {render_synthetic_shape(3, 32, 5), {435188.0, 21636052.0}},
      {shake_motion_kernel(15, 9.0, 3), {1.0, 25.33186644}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = fingerprint(cases[i].first);
    const auto want = cases[i].second;
    EXPECT_NEAR(got.first, want.first, 1e-6 * std::abs(want.first)) << "case " << i;
    EXPECT_NEAR(got.second, want.second, 1e-6 * std::abs(want.second)) << "case " << i;
  }
}

}  // namespace igb::data
