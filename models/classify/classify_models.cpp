#include "models/classify/classifier.h"

namespace igb::models::classify {

ClassifierOptions read_classifier_options(OptionReader& r, int64_t classes, int64_t size, int64_t min_size) {
  ClassifierOptions o;
  o.num_classes = r.get<int64_t>("num_classes", classes);
  o.input_size = r.get<int64_t>("input_size", size);
  r.check_range("num_classes", o.num_classes, 1, 100000);
  r.check_range("input_size", o.input_size, min_size, 4096);
  return o;
}

void register_classify_models(Registry<ModelSpec>& r) {
  auto add = [&](const char* name, std::function<Model(const nlohmann::json&)> f, const char* help) {
    r.add(name, {"classify", std::move(f)}, help);
  };
  add("simplenet_cifar", make_simplenet_cifar, "Distiller's simplenet: 2 conv + 3 fc, 32x32");
  add("lenet5", make_lenet5, "LeNet-5 for 28x28 MNIST");
  for (int64_t depth : {20, 32, 44, 56, 110}) {
    add(("resnet" + std::to_string(depth) + "_cifar").c_str(),
        [depth](const nlohmann::json& o) { return make_resnet_cifar(depth, o); },
        "He et al. CIFAR ResNet, zero-padded identity shortcuts, 32x32");
  }
  add("vgg16_cifar", make_vgg16_cifar, "VGG-16 with BN for CIFAR as in Li et al. 2016, 32x32");
  for (int64_t depth : {18, 34, 50}) {
    add(("resnet" + std::to_string(depth)).c_str(),
        [depth](const nlohmann::json& o) { return make_resnet(depth, o); }, "torchvision ResNet, 224x224");
  }
  add("vgg16", make_vgg16, "torchvision VGG-16 (no BN), 224x224");
  add("alexnet", make_alexnet, "torchvision AlexNet, 224x224");
  add("mobilenet_v2", make_mobilenet_v2, "torchvision MobileNetV2, 224x224");
  add("densenet_cifar", make_densenet_cifar, "DenseNet-BC (depth 40, growth 12) for 32x32");
}

}  // namespace igb::models::classify
