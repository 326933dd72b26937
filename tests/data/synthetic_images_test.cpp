#include "data/synthetic_images.h"

#include <gtest/gtest.h>

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

}  // namespace igb::data
