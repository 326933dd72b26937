#include "compress/masks.h"

#include <gtest/gtest.h>

#include "compress/pruners.h"

namespace igb::compress {

TEST(AgpTarget, CubicScheduleReachesFinalAtTheLastScheduledEpoch) {
  // start 0, end 10, freq 1: span 9.
  PolicyTiming t{0, 10, 1, {}};
  EXPECT_DOUBLE_EQ(agp_target(0.05, 0.4, 0, t), 0.05);
  EXPECT_NEAR(agp_target(0.05, 0.4, 3, t), 0.4 + (0.05 - 0.4) * std::pow(1 - 3.0 / 9, 3), 1e-12);
  EXPECT_DOUBLE_EQ(agp_target(0.05, 0.4, 9, t), 0.4);
  // start 2, end 12, freq 3: scheduled 2, 5, 8, 11; span 9.
  PolicyTiming t2{2, 12, 3, {}};
  EXPECT_EQ(t2.last(), 11);
  EXPECT_NEAR(agp_target(0.0, 0.8, 5, t2), 0.8 - 0.8 * std::pow(2.0 / 3, 3), 1e-12);
  EXPECT_DOUBLE_EQ(agp_target(0.0, 0.8, 11, t2), 0.8);
  // start 0, end 300, freq 1 (the original tool's agp_prune.yaml): last scheduled epoch 299.
  PolicyTiming t3{0, 300, 1, {}};
  EXPECT_DOUBLE_EQ(agp_target(0.05, 0.4, 299, t3), 0.4);
  EXPECT_LT(agp_target(0.05, 0.4, 298, t3), 0.4);
  // start 1, end 8, freq 2: scheduled 1, 3, 5, 7; span 6.
  PolicyTiming t4{1, 8, 2, {}};
  EXPECT_TRUE(t4.active(3));
  EXPECT_FALSE(t4.active(4));
  EXPECT_FALSE(t4.active(8));
  EXPECT_NEAR(agp_target(0.1, 0.7, 3, t4), 0.7 - 0.6 * std::pow(2.0 / 3, 3), 1e-12);
  EXPECT_DOUBLE_EQ(agp_target(0.1, 0.7, 7, t4), 0.7);
}

TEST(LevelMask, ZeroesExactlyFloorOfSparsityTimesN) {
  torch::manual_seed(0);
  auto w = torch::randn({7, 3, 3, 3});  // 189 elements
  for (double s : {0.0, 0.1, 0.5, 0.333, 0.99, 1.0}) {
    auto m = level_mask(w, s);
    EXPECT_EQ(m.eq(0).sum().item<int64_t>(), static_cast<int64_t>(std::floor(s * 189))) << s;
  }
  // Ties: all equal magnitudes still give exactly k zeros.
  auto flat = torch::ones({10});
  EXPECT_EQ(level_mask(flat, 0.35).eq(0).sum().item<int64_t>(), 3);
  // The smallest magnitudes go first, whatever their sign.
  auto v = torch::tensor({0.5f, -0.1f, 2.0f, 0.05f, -3.0f});
  EXPECT_TRUE(torch::equal(level_mask(v, 0.4), torch::tensor({1.f, 0.f, 1.f, 0.f, 1.f})));
}

TEST(RankedStructures, FilterAndChannelMapsOnAFixedTensor) {
  // 4 filters × 3 channels × 1 × 2. Filter mean |w|: f0 = 1, f1 = 0.5, f2 = 3, f3 = 0.25.
  auto w = torch::zeros({4, 3, 1, 2});
  w[0].fill_(1.0);
  w[1].fill_(-0.5);
  w[2].fill_(3.0);
  w[3].fill_(0.25);
  // Channel 1 is tiny in every filter.
  w.select(1, 1).mul_(0.01);
  auto fm = group_magnitudes(w, GroupType::kFilters);
  EXPECT_NEAR(fm[0].item<float>(), (1 + 0.01 + 1) / 3.0, 1e-6);
  EXPECT_EQ(smallest_groups(fm, 0.5), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(smallest_groups(fm, 0.3), (std::vector<int64_t>{3}));  // floor(1.2) = 1
  EXPECT_EQ(smallest_groups(fm, 0.99).size(), 3u);                 // never all unless 1
  EXPECT_EQ(smallest_groups(fm, 1.0).size(), 4u);
  auto cm = group_magnitudes(w, GroupType::kChannels);
  EXPECT_EQ(smallest_groups(cm, 0.34), (std::vector<int64_t>{1}));
  auto mask = group_mask(w, GroupType::kChannels, {1});
  EXPECT_EQ(mask.select(1, 1).sum().item<float>(), 0.0f);
  EXPECT_EQ(mask.sum().item<float>(), 16.0f);
  auto rows = torch::tensor({{1.f, 1.f}, {0.1f, -0.1f}, {2.f, 0.f}});
  EXPECT_EQ(smallest_groups(group_magnitudes(rows, GroupType::kRows), 0.4),
            (std::vector<int64_t>{1}));
  // L2 ranking differs from L1 when magnitudes are uneven: row 2 has L1 mean 1, L2 rms 1.414.
  auto l2 = group_magnitudes(rows, GroupType::kRows, true);
  EXPECT_NEAR(l2[2].item<float>(), std::sqrt(2.0f), 1e-6);
}

}  // namespace igb::compress
