#include "core/tensor_util.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

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

// Our pixel (un)shuffle against LibTorch's: equal values and equal gradients, for blocks of 2 and
// 3, on contiguous, channels-last and non-contiguous inputs; the two undo each other; shapes that
// do not divide get LibTorch's own error.
TEST(FastPixelShuffle, MatchesLibTorchInValueAndGradient) {
  torch::manual_seed(4);
  for (int64_t r : {2, 3}) {
    const auto base = torch::randn({2, 5 * r * r, 4, 6}, torch::kDouble);
    for (const auto& x0 : {base, base.contiguous(at::MemoryFormat::ChannelsLast),
                           base.transpose(2, 3).contiguous().transpose(2, 3)}) {
      auto a = x0.clone().requires_grad_(), b = x0.clone().requires_grad_();
      const auto ya = fast_pixel_shuffle(a, r), yb = at::pixel_shuffle(b, r);
      ASSERT_EQ(ya.sizes(), yb.sizes());
      EXPECT_TRUE(torch::equal(ya, yb)) << "r " << r;
      const auto g = torch::randn_like(yb);
      ya.backward(g);
      yb.backward(g);
      EXPECT_TRUE(torch::equal(a.grad(), b.grad())) << "r " << r;

      // [2, 5r², 4, 6] unshuffles by r only where r divides 4 and 6: r = 2.
      if (r == 2) {
        auto c = x0.clone().requires_grad_(), d = x0.clone().requires_grad_();
        const auto za = fast_pixel_unshuffle(c, r), zb = at::pixel_unshuffle(d, r);
        ASSERT_EQ(za.sizes(), zb.sizes());
        EXPECT_TRUE(torch::equal(za, zb));
        const auto h = torch::randn_like(zb);
        za.backward(h);
        zb.backward(h);
        EXPECT_TRUE(torch::equal(c.grad(), d.grad()));
      }
    }
    EXPECT_TRUE(torch::equal(fast_pixel_unshuffle(fast_pixel_shuffle(base, r), r), base));
  }
  EXPECT_THROW(fast_pixel_shuffle(torch::zeros({1, 6, 2, 2}), 2), c10::Error);
  EXPECT_THROW(fast_pixel_unshuffle(torch::zeros({1, 1, 3, 4}), 2), c10::Error);
}

}  // namespace igb
