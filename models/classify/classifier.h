#pragma once

#include "models/classify/classify_options.h"
#include "models/model.h"

namespace igb::models::classify {

/// Base of the classification models: an image batch [N, C, H, W] in, logits [N, classes] out.
class ClassifierImpl : public ModelImpl {
 public:
  /// `input_size` is the side of the square input, `channels` its channel count.
  ClassifierImpl(int64_t num_classes, int64_t channels, int64_t input_size)
      : num_classes_(num_classes), input_shape_{1, channels, input_size, input_size} {}

  int64_t num_classes() const { return num_classes_; }
  std::vector<int64_t> input_shape() const override { return input_shape_; }

 protected:
  int64_t num_classes_;
  std::vector<int64_t> input_shape_;
};

/// A bias-free k x k convolution padded by k / 2, as the ResNets use them.
inline torch::nn::Conv2d padded_conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false));
}

/// Adds every classification model to `registry`, filed under `family`.
void register_classify_models(Registry<ModelSpec>& registry, const std::string& family);

// Factories, one file per architecture family; the registry converts model args to the options.
Model make_simplenet_cifar(const SimpleNetCifarOptions& options);
Model make_lenet5(const LeNet5Options& options);
Model make_simplenet_mnist(const SimpleNetMnistOptions& options);
Model make_resnet_cifar(const ResNetCifarOptions& options);
/// make_resnet_cifar with Distiller's early exit after layer1.2.relu2
/// (models/classify/early_exit.h).
Model make_resnet_cifar_earlyexit(const ResNetCifarOptions& options);
Model make_preact_resnet_cifar(const PreactResNetCifarOptions& options);
Model make_vgg16_cifar(const Vgg16CifarOptions& options);
Model make_resnet(const ResNetOptions& options);
Model make_preact_resnet(const PreactResNetOptions& options);
Model make_vgg(const VggOptions& options);
Model make_alexnet(const AlexNetOptions& options);
Model make_alexnet_bn(const AlexNetBnOptions& options);
Model make_mobilenet(const MobileNetOptions& options);
Model make_mobilenet_v2(const MobileNetV2Options& options);
Model make_densenet_cifar(const DenseNetCifarOptions& options);

}  // namespace igb::models::classify
