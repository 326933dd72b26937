#pragma once

// Exact integer sums on every x86 ISA. Without VNNI (SSE4.1, AVX2, AVX-512 before Cascade Lake)
// oneDNN's u8×s8 kernels multiply with `vpmaddubsw`, which adds two products into a saturating
// 16-bit lane before widening: a pair u_a·w_a + u_b·w_b beyond ±32767 is clipped. With an s8
// input they shift it into u8 and halve the weights (an odd weight loses its last bit). A layer
// whose sums could go wrong that way runs on its input split in two halves of at most 128 each,
// twice the channels (weights doubled to match): no pair of products can then pass
// 128·127·2 = 32512. Internal to runtime/.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "runtime/int8_grids.h"
#include "runtime/plan.h"

namespace igb::runtime {

/// Whether a layer with integer weights `q` reading an 8-bit input sums exactly on this ISA
/// when run as it is. `signed_input`: an s8 input that may be negative; `top`: the largest
/// integer an unsigned input holds; `depthwise`: one input channel per group (oneDNN's depthwise
/// kernels widen before multiplying).
bool int8_sums_exact(const Int8Isa& isa, const at::Tensor& q, bool signed_input, int64_t top,
                     bool depthwise);

/// The weights of the layer run on its split input: within each of `groups` groups of input
/// channels, the weights of the first half and then of the second, [q, q] for an unsigned input
/// (u = min(u, 128) + rest) or [q, −q] for a signed one (v = max(v, 0) − max(−v, 0)).
at::Tensor split_weights(const at::Tensor& q, int64_t groups, bool signed_input);

/// Splits an 8-bit NHWC (or NC) native tensor of `channels` channels in `groups` groups into a u8
/// one of twice the channels, as split_weights() expects: per group its channels' first halves,
/// then their second halves.
class Int8SplitStep : public Step {
 public:
  Int8SplitStep(int src, int dst, int64_t rows, int64_t channels, int64_t groups,
                bool signed_input);
  void run(Plan& plan) override;

 private:
  int src_, dst_;
  int64_t rows_, channels_, groups_;
  bool signed_;
};

}  // namespace igb::runtime
