#include "data/image_metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace igb::data {

TEST(Psnr, ConstantErrorGivesKnownValue) {
  auto a = torch::full({1, 8, 8}, 0.5, torch::kFloat64);
  auto b = a + 0.1;  // MSE 0.01 → 20 dB
  EXPECT_NEAR(psnr(a, b), 20.0, 1e-9);
  auto c = a + 1.0 / 255;  // one grey level → 48.13 dB
  EXPECT_NEAR(psnr(a, c), 20 * std::log10(255.0), 1e-6);
  EXPECT_TRUE(std::isinf(psnr(a, a)));
}

TEST(Psnr, ShaveIgnoresBorders) {
  auto a = torch::zeros({1, 10, 10});
  auto b = a.clone();
  b.index_put_({0, 0, torch::indexing::Slice()}, 1.0);  // top row wrong
  b[0][5][5] = 0.5;                                     // one interior pixel off by 0.5
  // With a border of 2, only the interior pixel counts: MSE = 0.25 / 36.
  EXPECT_NEAR(psnr(a, b, 2), 10 * std::log10(36 / 0.25), 1e-9);
}

TEST(Ssim, IdenticalIsOneAndConstantsFollowTheLuminanceTerm) {
  torch::manual_seed(0);
  auto x = torch::rand({1, 32, 32});
  EXPECT_NEAR(ssim(x, x), 1.0, 1e-12);
  // Two flat images: variances are zero, so SSIM = (2ab + C1) / (a² + b² + C1) on the 0–255 scale.
  double a = 100, b = 120, c1 = std::pow(0.01 * 255, 2);
  auto fa = torch::full({1, 16, 16}, a / 255, torch::kFloat64);
  auto fb = torch::full({1, 16, 16}, b / 255, torch::kFloat64);
  EXPECT_NEAR(ssim(fa, fb), (2 * a * b + c1) / (a * a + b * b + c1), 1e-9);
}

TEST(Ssim, NoiseLowersItMonotonically) {
  torch::manual_seed(1);
  auto x = torch::rand({1, 48, 48});
  double s1 = ssim(x, (x + 0.02 * torch::randn_like(x)).clamp(0, 1));
  double s2 = ssim(x, (x + 0.2 * torch::randn_like(x)).clamp(0, 1));
  EXPECT_LT(s1, 1.0);
  EXPECT_LT(s2, s1);
  EXPECT_GT(s2, 0.0);
}

}  // namespace igb::data
