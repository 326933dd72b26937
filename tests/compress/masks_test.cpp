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
  // The smallest magnitudes go first, whatever their sign.
  auto v = torch::tensor({0.5f, -0.1f, 2.0f, 0.05f, -3.0f});
  EXPECT_TRUE(torch::equal(level_mask(v, 0.4), torch::tensor({1.f, 0.f, 1.f, 0.f, 1.f})));
}

// Distiller's SparsityLevelParameterPruner.create_mask (distiller/pruning/level_pruner.py):
// k = int(s · n), threshold = the k-th smallest |w|, mask = |w| > threshold.
TEST(LevelMask, CountsWithoutSlackAndPrunesEveryTieAtTheThreshold) {
  // 0.58 · 50 is 28.999999999999996 in double: int() gives 28, so magnitudes 1..28 go.
  auto w = torch::arange(1, 51, torch::kFloat32);
  EXPECT_EQ(level_mask(w, 0.58).eq(0).sum().item<int64_t>(), 28);
  EXPECT_TRUE(torch::equal(level_mask(w, 0.58), w.gt(28).to(torch::kFloat32)));
  // All ten equal: k = floor(0.35 · 10) = 3, threshold 1, and all ten are at it.
  EXPECT_EQ(level_mask(torch::ones({10}), 0.35).eq(0).sum().item<int64_t>(), 10);
  // Five weights already zero and k = floor(0.2 · 10) = 2: threshold 0, all five stay pruned.
  auto z = torch::tensor({0.f, 3.f, 0.f, -1.f, 0.f, 2.f, 0.f, 4.f, 0.f, -5.f});
  EXPECT_TRUE(torch::equal(level_mask(z, 0.2), z.ne(0).to(torch::kFloat32)));
  // {1, 2, 2, 2, 5}, k = floor(0.4 · 5) = 2: threshold 2, so 1 and the three 2s (4 of 5) go.
  auto t = torch::tensor({2.f, 5.f, -2.f, 1.f, 2.f});
  EXPECT_TRUE(torch::equal(level_mask(t, 0.4), torch::tensor({0.f, 1.f, 0.f, 0.f, 0.f})));
  // k = floor(0.05 · 10) = 0: nothing.
  EXPECT_EQ(level_mask(torch::ones({10}), 0.05).eq(0).sum().item<int64_t>(), 0);
}

// Distiller's num_structs_to_prune and k_smallest_elems (distiller/norms.py) and the ranked
// pruners' `mags.gt(bottomk[-1])` (distiller/pruning/ranked_structures_pruner.py).
TEST(RankedStructures, CountsWithoutSlackAndPrunesEveryTieAtTheThreshold) {
  EXPECT_EQ(structures_to_prune(50, 0.58), 28);  // floor(28.999999999999996)
  EXPECT_EQ(structures_to_prune(4, 0.99), 3);    // floor(3.96) = 3
  EXPECT_EQ(structures_to_prune(4, 0.999999), 3);
  EXPECT_EQ(structures_to_prune(1, 0.999), 0);  // floor(0.999) = 0
  EXPECT_EQ(structures_to_prune(4, 1.0), 4);
  EXPECT_EQ(structures_to_prune(4, 0.2), 0);  // floor(0.8) = 0
  // 50 distinct magnitudes 50, 49, …, 1 at 0.58: the 28 smallest are at indices 22..49.
  auto mags = torch::arange(50, 0, -1, torch::kFloat32);
  std::vector<int64_t> expected;
  for (int64_t i = 22; i < 50; ++i) expected.push_back(i);
  EXPECT_EQ(smallest_groups(mags, 0.58), expected);
  // {1, 2, 2, 2, 5} at 0.4: k = 2, threshold 2, so indices of 1 and of every 2.
  EXPECT_EQ(smallest_groups(torch::tensor({2.f, 5.f, 2.f, 1.f, 2.f}), 0.4),
            (std::vector<int64_t>{0, 2, 3, 4}));
  // Four equal filters at 0.5: k = 2, and every filter ties at the threshold: all four go.
  EXPECT_EQ(smallest_groups(torch::full({4}, 0.3f), 0.5), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_TRUE(smallest_groups(torch::tensor({1.f, 2.f, 3.f, 4.f}), 0.2).empty());
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
  // Distiller's "Rows" of a 2-D weight are its input columns (rank_and_prune_rows ranks cols_norm,
  // distiller/pruning/ranked_structures_pruner.py): [2 outputs × 3 inputs], column means of |w|
  // (1 + 2)/2 = 1.5, (0.1 + 0.1)/2 = 0.1, (1 + 0)/2 = 0.5.
  auto fc = torch::tensor({{1.f, 0.1f, 1.f}, {-2.f, -0.1f, 0.f}});
  auto rm = group_magnitudes(fc, GroupType::kRows);
  ASSERT_EQ(rm.numel(), 3);
  EXPECT_NEAR(rm[0].item<float>(), 1.5f, 1e-6);
  EXPECT_NEAR(rm[2].item<float>(), 0.5f, 1e-6);
  EXPECT_EQ(smallest_groups(rm, 0.4), (std::vector<int64_t>{1}));  // floor(1.2) = 1
  EXPECT_TRUE(torch::equal(group_mask(fc, GroupType::kRows, {1}),
                           torch::tensor({{1.f, 0.f, 1.f}, {1.f, 0.f, 1.f}})));
  // L2 ranking differs from L1 when magnitudes are uneven: column 2 has L1 mean 0.5, L2 rms
  // sqrt((1 + 0)/2) = 0.707.
  auto l2 = group_magnitudes(fc, GroupType::kRows, true);
  EXPECT_NEAR(l2[2].item<float>(), std::sqrt(0.5f), 1e-6);
}

}  // namespace igb::compress
