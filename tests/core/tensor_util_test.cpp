#include "core/tensor_util.h"

#include <gtest/gtest.h>

namespace igb {

TEST(ZeroFraction, CountsExactZerosOnly) {
  // 24 elements, 9 of them exactly zero; 1e-30 and -0.0 are checked on their own below.
  auto t = torch::arange(24, torch::kFloat32).reshape({2, 3, 4});
  t.index_put_({0, 0}, 0.0);                            // 4 zeros (one was already 0)
  t.index_put_({1, torch::indexing::Slice(), 1}, 0.0);  // 3 more
  t.index_put_({1, 2, 3}, 0.0);                         // 1 more
  t.index_put_({0, 2, 0}, 0.0);                         // 1 more
  EXPECT_EQ(count_zeros(t), 9);
  EXPECT_DOUBLE_EQ(zero_fraction(t), 9.0 / 24.0);

  auto tiny = torch::tensor({1e-30f, -0.0f, 0.0f, 3.0f});
  EXPECT_EQ(count_zeros(tiny), 2);  // -0.0 is zero, 1e-30 is not
  EXPECT_DOUBLE_EQ(zero_fraction(tiny), 0.5);
}

TEST(ZeroFraction, EmptyAndRequiresGradTensors) {
  EXPECT_EQ(zero_fraction(torch::empty({0, 3})), 0.0);
  auto w = torch::zeros({5}).requires_grad_(true);
  EXPECT_DOUBLE_EQ(zero_fraction(w), 1.0);
  EXPECT_EQ(zero_fraction(torch::ones({2, 2}, torch::kInt32)), 0.0);
}

TEST(IndexTensor, SelectsTheKeptRows) {
  auto idx = index_tensor({2, 0});
  EXPECT_EQ(idx.scalar_type(), torch::kLong);
  EXPECT_EQ(idx.device(), torch::Device(torch::kCPU));
  ASSERT_EQ(idx.dim(), 1);
  auto t = torch::arange(12, torch::kFloat32).reshape({3, 4});
  auto kept = t.index_select(0, idx);
  EXPECT_TRUE(torch::equal(kept, torch::stack({t[2], t[0]})));
  EXPECT_EQ(index_tensor({}).numel(), 0);
}

}  // namespace igb
