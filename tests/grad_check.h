// A check shared by the tests of operators that igb computes another way than LibTorch.
#pragma once

#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/types.h>

#include <vector>

namespace igb::test {

/// Expects `ours` to equal `ref` within `tol` (relative and absolute), and the gradients of both
/// with respect to each of `inputs` for one random output gradient: an operator computed another
/// way (sub-pixel, space-to-depth) against LibTorch's own.
inline void expect_same_value_and_gradients(const at::Tensor& ours, const at::Tensor& ref,
                                            const std::vector<at::Tensor>& inputs, double tol) {
  ASSERT_EQ(ours.sizes(), ref.sizes());
  EXPECT_TRUE(torch::allclose(ours, ref, tol, tol));
  const auto gout = torch::randn_like(ref);
  const auto gref = torch::autograd::grad({ref}, inputs, {gout});
  const auto gours = torch::autograd::grad({ours}, inputs, {gout});
  for (size_t i = 0; i < inputs.size(); ++i)
    EXPECT_TRUE(torch::allclose(gours[i], gref[i], tol, tol)) << "gradient of input " << i;
}

}  // namespace igb::test
