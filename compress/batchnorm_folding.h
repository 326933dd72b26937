#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::compress {

/// The layer a BatchNorm follows, which decides the axis of the weight its scale multiplies.
enum class FoldedLayer {
  /// Convolution (or Linear): weight (out, in/groups, k...), output channel on axis 0.
  kConvolution,
  /// Transposed convolution: weight (in, out/groups, k...), output channel on axis 1 per group.
  kTransposedConvolution,
};

/// A BatchNorm in inference: y = gamma · (x − mean) / sqrt(var + eps) + beta, per channel.
/// `gamma` and `beta` may be undefined (affine=false: 1 and 0).
struct BatchNormParams {
  at::Tensor gamma, beta, running_mean, running_var;
  double eps = 1e-5;
};

/// A layer's weight and bias with the BatchNorm after it folded in.
struct FoldedWeights {
  at::Tensor weight;
  at::Tensor bias;
};

/// Folds BatchNorm `bn` into the layer before it (weight, bias undefined when the layer has none),
/// as Distiller's `fold_batchnorm` quantizer policy and LibTorch's `FoldConvBatchNorm` do:
/// w' = w · s, b' = (b − mean) · s + beta with s = gamma / sqrt(var + eps), s applied per output
/// channel. Computed in double and returned in the weight's dtype; the inputs are not changed.
/// `groups` matters only for transposed convolutions. Throws InputError when the BatchNorm's
/// channel count is not the layer's output channel count.
FoldedWeights fold_batchnorm(const at::Tensor& weight, const at::Tensor& bias,
                             const BatchNormParams& bn, FoldedLayer layer, int64_t groups = 1);

/// The per-channel affine map a layer with bias `bias` (undefined: none) followed by BatchNorm
/// `bn` applies to the layer's sums: y = scale · sum + shift, scale = gamma / sqrt(var + eps),
/// shift = (bias − mean) · scale + beta, in double, of `channels` entries. Without a BatchNorm
/// (`bn` null): scale 1, shift the bias. An integer layer keeps its integer weights and puts
/// `scale` into its output scales (runtime int8, the CPU Q/DQ export).
struct ChannelAffine {
  at::Tensor scale, shift;
};
ChannelAffine channel_affine(const BatchNormParams* bn, const at::Tensor& bias, int64_t channels);

}  // namespace igb::compress
