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

  /// The architecture's options, and the model args of exits the registry attached ("exits",
  /// "exit_pool"; models/classify/early_exit.h) when there are any.
  nlohmann::json options_json() const final {
    nlohmann::json j = architecture_options_json();
    for (const auto& [key, value] : exit_args_.items()) j[key] = value;
    return j;
  }
  void set_exit_args(nlohmann::json args) { exit_args_ = std::move(args); }

 protected:
  /// options_to_json() of the architecture's options struct.
  virtual nlohmann::json architecture_options_json() const = 0;

  int64_t num_classes_;
  std::vector<int64_t> input_shape_;

 private:
  nlohmann::json exit_args_ = nlohmann::json::object();
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
/// resnet50 with Distiller's two exits (resnet50_earlyexit; models/classify/early_exit.h).
Model make_resnet_earlyexit(const ResNetOptions& options);
/// The Inception-v3 of torchvision with a stem for 32x32 inputs (models/classify/inception_v3.cpp);
/// with options.exits, the four exits of the cascade after its layers 4, 8, 12 and 16.
Model make_inception_v3_cifar(const InceptionV3CifarOptions& options);

}  // namespace igb::models::classify
