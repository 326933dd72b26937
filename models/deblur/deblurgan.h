#pragma once

#include <torch/arg.h>
#include <torch/nn/modules/conv.h>

#include <string>

#include "core/sequential.h"
#include "models/model.h"

namespace igb::models::deblur {

/// Options of the DeblurGAN generator (model args and checkpoint keys: ngf, blocks, dropout).
///
///   auto model = make_deblurgan(DeblurGanOptions().ngf(32).blocks(6));
struct DeblurGanOptions {
  /// Filters of the first convolution; the trunk runs at 4·ngf. 1 … 1024. Default 64.
  TORCH_ARG(int64_t, ngf) = 64;
  /// Residual blocks at 4·ngf channels, 0 … 64. Default 9.
  TORCH_ARG(int64_t, blocks) = 9;
  /// Dropout probability between the two convolutions of each residual block, in [0, 1); 0 leaves
  /// the Dropout layer out (and shifts the block's later indices down by one, as in the original
  /// code without use_dropout). Default 0.5, DeblurGAN's setting.
  TORCH_ARG(double, dropout) = 0.5;

 public:
  /// Each option as (JSON key, field, bounds); see options_from_json.
  template <class F>
  void visit(F&& f) {
    f("ngf", ngf_, OptionBounds{1, 1024});
    f("blocks", blocks_, OptionBounds{0, 64});
    f("dropout", dropout_);
  }
  void validate(const std::string& model) const;
};

/// One residual block of the generator: x + conv_block(x), conv_block = reflection pad 1, conv
/// 3×3, instance norm, ReLU, [dropout], reflection pad 1, conv 3×3, instance norm.
class ResnetBlockImpl : public torch::nn::Module {
 public:
  ResnetBlockImpl(int64_t channels, double dropout);
  torch::Tensor forward(torch::Tensor x);

  Sequential conv_block{nullptr};
};

TORCH_MODULE(ResnetBlock);

/// The DeblurGAN generator (Kupyn et al. 2018), the ResNet generator of its original code with
/// instance norm and learn_residual:
///
///   reflection pad 3, conv 7×7 3→ngf, IN, ReLU;
///   2 × (conv 3×3 stride 2, ×2 channels, IN, ReLU);
///   `blocks` × ResnetBlock(4·ngf);
///   2 × (transposed conv 3×3 stride 2 output padding 1, ÷2 channels, IN, ReLU);
///   reflection pad 3, conv 7×7 ngf→3, tanh;
///   output = clamp(input + that, −1, 1).
///
/// Images are in [−1, 1], as in the original (x·2 − 1 from the loaders' [0, 1]): the tanh output
/// is a residual spanning the whole range, and the clamp keeps the result a valid image. Every
/// conv has a bias; instance norms are non-affine with no running statistics, so they hold no
/// parameters. H and W must be multiples of 4 (two stride-2 stages and back).
///
/// Layers, with the original's names: `model.0` … `model.N` in the order above (`model.1` the
/// first conv, `model.10` … the residual blocks with `model.10.conv_block.1` and `.6` their
/// convs, then the transposed convs, the last conv and the tanh).
class DeblurGanImpl : public ModelImpl {
 public:
  explicit DeblurGanImpl(DeblurGanOptions options = {});
  torch::Tensor forward_impl(torch::Tensor x) override;
  nlohmann::json options_json() const override;
  /// A 64×64 RGB image (the paper's figures are for 256×256).
  std::vector<int64_t> input_shape() const override { return {1, 3, 64, 64}; }

  DeblurGanOptions options;
  Sequential model{nullptr};
};

Model make_deblurgan(const DeblurGanOptions& options);

}  // namespace igb::models::deblur
