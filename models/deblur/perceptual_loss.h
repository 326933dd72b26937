#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/modules/container/sequential.h>

#include <filesystem>

namespace igb::models::deblur {

/// VGG-19's layers up to conv3_3, before its ReLU: torchvision's `vgg19().features[0..14]`, the
/// feature extractor of DeblurGAN's perceptual loss. Children are named as torchvision names
/// them: "0" conv1_1, "1" ReLU, "2" conv1_2, "3" ReLU, "4" max pool, "5" conv2_1, … "14"
/// conv3_3, so a LibTorch archive of torchvision's `features` loads into it by name.
torch::nn::Sequential vgg19_conv3_3();

/// The perceptual loss of DeblurGAN (Kupyn et al. 2018): the mean squared difference of the
/// conv3_3 features of the restored and the sharp image; the sharp image's features carry no
/// gradient and the network itself is frozen. Images come in on the generator's [−1, 1] range and
/// are mapped to [0, 1] and normalised by ImageNet's channel mean and deviation, as torchvision's
/// weights expect (DeblurGAN's own code feeds [−1, 1] unnormalised).
class PerceptualLoss {
 public:
  /// Loads the weights of the seven convolutions from `weights`: a LibTorch archive whose
  /// children "0", "2", "5", "7", "10", "12", "14" hold `weight` and `bias` of VGG-19's shapes
  /// (what torch::save of vgg19_conv3_3() writes, or torch.jit.save of a scripted
  /// torchvision vgg19().features; further children are ignored). A missing file, another
  /// format, a missing layer or a wrong shape is an InputError naming the file and the layer.
  PerceptualLoss(const std::filesystem::path& weights, const c10::Device& device);

  /// The loss of `restored` (with gradient) against `sharp`, both [N, 3, H, W] on [−1, 1].
  at::Tensor operator()(const at::Tensor& restored, const at::Tensor& sharp);

  /// The features of `images` [N, 3, H, W] on [−1, 1]: [N, 256, H/4, W/4].
  at::Tensor features(const at::Tensor& images);

 private:
  torch::nn::Sequential net_{nullptr};
  at::Tensor mean_, std_;
};

}  // namespace igb::models::deblur
