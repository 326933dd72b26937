#include "core/tensor_util.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"

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

// The self-ensemble of a per-pixel function is the function itself (up to the rounding of the
// sum of eight equal values); that of a convolution (zero padding, so every orientation pads
// alike) is, by linearity, the convolution with the mean of its kernel's eight flips and
// transposes: an asymmetric kernel tells whether each of the eight orientations was undone
// correctly, on a non-square image.
TEST(GeometricSelfEnsemble, MatchesTheDihedralMeanOfAConvolutionKernel) {
  torch::manual_seed(3);
  const auto x = torch::rand({2, 3, 9, 14});
  const auto per_pixel = [](const at::Tensor& t) { return t * 2 + 1; };
  EXPECT_TRUE(torch::allclose(geometric_self_ensemble(per_pixel, x), per_pixel(x), 1e-6, 1e-6));

  const auto k = torch::randn({4, 3, 3, 3});
  const auto conv = [&k](const at::Tensor& t) {
    return torch::conv2d(t, k, {}, /*stride=*/1, /*padding=*/1);
  };
  std::vector<at::Tensor> kernels;
  for (const auto& base : {k, k.transpose(2, 3)})
    for (const auto& h : {base, base.flip({2})})
      for (const auto& w : {h, h.flip({3})}) kernels.push_back(w);
  const auto mean_kernel = torch::stack(kernels).mean(0);
  const auto expected = torch::conv2d(x, mean_kernel, {}, 1, 1);
  const auto got = geometric_self_ensemble(conv, x);
  ASSERT_EQ(got.sizes(), expected.sizes());
  EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-5));
  EXPECT_FALSE(torch::allclose(conv(x), expected, 1e-3, 1e-3)) << "the kernel is asymmetric";

  // Scale 2 output (super-resolution): nearest upsampling commutes with every orientation.
  const auto up = [](const at::Tensor& t) {
    return t.repeat_interleave(2, 2).repeat_interleave(2, 3);
  };
  EXPECT_TRUE(torch::allclose(geometric_self_ensemble(up, x), up(x)));
}

TEST(GeometricSelfEnsemble, RefusesOtherRanksAndOrientationDependentShapes) {
  const auto id = [](const at::Tensor& t) { return t; };
  EXPECT_THROW(geometric_self_ensemble(id, torch::zeros({3, 4, 4})), InputError);
  // Drops the last column: the transposed input maps back one row short.
  const auto crop = [](const at::Tensor& t) { return t.narrow(3, 0, t.size(3) - 1); };
  try {
    geometric_self_ensemble(crop, torch::zeros({1, 1, 4, 6}));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[1x1x3x6], not [1x1x4x5]"), std::string::npos)
        << e.what();
  }
}

}  // namespace igb
