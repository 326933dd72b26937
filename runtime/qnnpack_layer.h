#pragma once

// A quantized layer of an inference plan run by LibTorch's QNNPACK kernels instead of oneDNN's
// (InferenceOptions::int8_engine). Internal to runtime/.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "runtime/plan.h"

namespace igb::runtime {

/// Whether this LibTorch has the QNNPACK quantized engine.
bool qnnpack_available();

/// How a QnnpackLayerStep computes its layer. Values in 8-bit tensors are integers times a scale
/// with zero point 0; a signed tensor (s8) of a grid that may be negative is shifted by 128 into
/// QNNPACK's quint8 and back.
struct QnnpackLayer {
  /// The integer weights ([out, in / groups, kh, kw]; a linear layer's [out, in] as 1x1), and
  /// the per-channel scale of each output channel's sum (weight step times the folded
  /// BatchNorm's factor; a negative factor flips the channel's integers).
  at::Tensor weight_q, weight_scale;
  /// The bias in units of the output (BatchNorm's shift included), float32 [out].
  at::Tensor bias;
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
  /// Input: NHWC shape {N, H, W, C} as NCHW sizes, its scale, and whether an s8 tensor of it can
  /// hold negative values.
  std::vector<int64_t> input_shape, output_shape;
  double input_scale = 1;
  bool input_signed = false;
  /// Output: its scale, type, and the integer range [lo, hi] it is clamped to (the fused ReLUs
  /// and clamps and the grid of the fake quantization it writes).
  double output_scale = 1;
  bool output_s8 = false;
  int64_t lo = 0, hi = 255;
  /// A residual add: the destination holds the skip's integers (of `skip_scale`, signed when
  /// `skip_signed`) before the step; the layer's output is rounded to the output's step first.
  bool sum = false;
  double skip_scale = 1;
  bool skip_signed = false;
};

/// The layer on plain NHWC 8-bit native tensors `src` and `dst` (nc for a linear layer). The
/// weights are pre-packed once, with the QNNPACK engine.
class QnnpackLayerStep : public Step {
 public:
  QnnpackLayerStep(QnnpackLayer layer, int src, int dst, StepInfo step_info);
  void run(Plan& plan) override;

 private:
  QnnpackLayer layer_;
  int src_, dst_;
  c10::IValue packed_;
  at::Tensor shifted_;  // a signed input moved into quint8
};

}  // namespace igb::runtime
