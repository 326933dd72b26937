#pragma once

#include <torch/arg.h>

#include "core/sequential.h"
#include "models/model.h"

namespace igb::models::deblur {

/// Options of the PatchGAN critic (model args and checkpoint keys: ndf, n_layers).
///
///   auto critic = make_patchgan(PatchGanOptions().ndf(32));
struct PatchGanOptions {
  /// Filters of the first convolution; each stride-2 stage doubles them, up to 8·ndf. 1 … 1024.
  /// Default 64.
  TORCH_ARG(int64_t, ndf) = 64;
  /// Stride-2 convolutions, 1 … 6; 3 gives the 70×70 receptive field. Default 3.
  TORCH_ARG(int64_t, n_layers) = 3;

 public:
  /// Each option as (JSON key, field, bounds); see options_from_json.
  template <class F>
  void visit(F&& f) {
    f("ndf", ndf_, OptionBounds{1, 1024});
    f("n_layers", n_layers_, OptionBounds{1, 6});
  }
};

/// The PatchGAN critic of pix2pix (Isola et al. 2017), as DeblurGAN trains it with WGAN-GP: an
/// image [N, 3, H, W] in, one unbounded score per overlapping patch [N, 1, H', W'] out (no
/// sigmoid). All convs are 4×4 with padding 1 and a bias:
///
///   conv stride 2 3→ndf, LeakyReLU 0.2;
///   n_layers − 1 × (conv stride 2, ×2 channels up to 8·ndf, IN, LeakyReLU 0.2);
///   conv stride 1 → min(2^n_layers, 8)·ndf, IN, LeakyReLU 0.2;
///   conv stride 1 → 1.
///
/// The norm is instance norm, non-affine and without running statistics, as in DeblurGAN's
/// critic: the gradient penalty of WGAN-GP is taken per sample, which batch norm would break by
/// coupling the samples of a batch. With n_layers 3 each score sees 70×70 input pixels; a 256×256
/// image gives 30×30 scores, 64×64 gives 6×6. (DeblurGAN's own copy pads by 2, which makes each
/// map 1–2 pixels larger; the receptive field is the same.)
///
/// Layers, with the original's names: `model.0`, `model.1`, … in the order above (`model.0`,
/// `model.2`, `model.5`, … the convs).
class PatchGanImpl : public ModelImpl {
 public:
  explicit PatchGanImpl(PatchGanOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;
  /// A 64×64 RGB image.
  std::vector<int64_t> input_shape() const override { return {1, 3, 64, 64}; }

  PatchGanOptions options;
  Sequential model{nullptr};
};

Model make_patchgan(const PatchGanOptions& options);

}  // namespace igb::models::deblur
