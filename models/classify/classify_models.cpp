#include "models/classify/classifier.h"

namespace igb::models::classify {

void register_classify_models(Registry<ModelSpec>& r) {
  add_model(r, "simplenet_cifar", "classify", make_simplenet_cifar,
            "Distiller's simplenet: 2 conv + 3 fc, 32x32");
  add_model(r, "lenet5", "classify", make_lenet5, "LeNet-5 for 28x28 MNIST");
  for (int64_t depth : {20, 32, 44, 56, 110}) {
    add_model(r, "resnet" + std::to_string(depth) + "_cifar", "classify", make_resnet_cifar,
              "He et al. CIFAR ResNet, zero-padded identity shortcuts, 32x32",
              ResNetCifarOptions().depth(depth));
  }
  add_model(r, "vgg16_cifar", "classify", make_vgg16_cifar,
            "VGG-16 with BN for CIFAR as in Li et al. 2016, 32x32");
  for (int64_t depth : {18, 34, 50}) {
    add_model(r, "resnet" + std::to_string(depth), "classify", make_resnet,
              "torchvision ResNet, 224x224", ResNetOptions().depth(depth));
  }
  add_model(r, "vgg16", "classify", make_vgg16, "torchvision VGG-16 (no BN), 224x224");
  add_model(r, "alexnet", "classify", make_alexnet, "torchvision AlexNet, 224x224");
  add_model(r, "mobilenet_v2", "classify", make_mobilenet_v2, "torchvision MobileNetV2, 224x224");
  add_model(r, "densenet_cifar", "classify", make_densenet_cifar,
            "DenseNet-BC (depth 40, growth 12) for 32x32");
}

}  // namespace igb::models::classify
