#include "models/classify/classifier.h"
#include "models/classify/early_exit.h"

namespace igb::models::classify {

namespace {

/// add_model for a classifier: besides its own options it takes the model args "exits" and
/// "exit_pool", which attach early exits at any of its activations (models/classify/early_exit.h).
template <class Options>
void add_classifier(Registry<ModelSpec>& registry, const std::string& name,
                    const std::string& family, Model (*make)(const Options&), std::string help,
                    Options start = Options()) {
  ModelSpec spec;
  spec.family = family;
  spec.make = [name, make, start](const nlohmann::json& args) {
    nlohmann::json own = args;
    const auto exits = take_exit_args(own);
    auto model = make(options_from_json(name, own, start));
    if (!exits.empty()) {
      auto* clf = dynamic_cast<ClassifierImpl*>(model.get());
      attach_exit_args(*model, exits, model->input_shape(), clf->num_classes());
      clf->set_exit_args(exits);
    }
    return model;
  };
  spec.defaults = options_to_json(start);
  registry.add(name, std::move(spec), std::move(help));
}

}  // namespace

void register_classify_models(Registry<ModelSpec>& r, const std::string& family) {
  add_classifier(r, "simplenet_cifar", family, make_simplenet_cifar,
                 "Distiller's simplenet: 2 conv + 3 fc, 32x32");
  add_classifier(r, "simplenet_mnist", family, make_simplenet_mnist,
                 "Distiller's simplenet_mnist: 2 conv + 2 fc, log-softmax output, 28x28");
  add_classifier(r, "lenet5", family, make_lenet5, "LeNet-5 for 28x28 MNIST");
  for (int64_t depth : {20, 32, 44, 56, 110}) {
    const std::string d = std::to_string(depth);
    add_classifier(
        r, "resnet" + d + "_cifar", family, make_resnet_cifar,
        "He et al. CIFAR ResNet, zero-padded identity shortcuts (shortcut=conv: Distiller's "
        "1x1 conv + BN), 32x32",
        ResNetCifarOptions().depth(depth));
    add_classifier(r, "resnet" + d + "_cifar_earlyexit", family, make_resnet_cifar_earlyexit,
                   "resnet" + d +
                       "_cifar with Distiller's early exit after layer1.2.relu2 (AvgPool2d(3), "
                       "Flatten, Linear), 32x32",
                   ResNetCifarOptions().depth(depth));
    add_classifier(r, "preact_resnet" + d + "_cifar", family, make_preact_resnet_cifar,
                   "Distiller's pre-activation CIFAR ResNet (shortcut=conv: 1x1 conv), 32x32",
                   PreactResNetCifarOptions().depth(depth));
  }
  add_classifier(r, "plain20_cifar", family, make_resnet_cifar,
                 "Distiller's plain20: resnet20_cifar without shortcuts, 32x32",
                 ResNetCifarOptions().depth(20).residual(false));
  add_classifier(
      r, "vgg16_cifar", family, make_vgg16_cifar,
      "VGG-16 with BN for CIFAR as in Li et al. 2016 (layout=distiller: Distiller's), 32x32");
  for (int64_t depth : {18, 34, 50}) {
    const std::string d = std::to_string(depth);
    add_classifier(r, "resnet" + d, family, make_resnet, "torchvision ResNet, 224x224",
                   ResNetOptions().depth(depth));
    add_classifier(r, "preact_resnet" + d, family, make_preact_resnet,
                   "Distiller's pre-activation ImageNet ResNet, 224x224",
                   PreactResNetOptions().depth(depth));
  }
  add_classifier(r, "resnet50_earlyexit", family, make_resnet_earlyexit,
                 "resnet50 with Distiller's exits after layer1.2.relu3 and layer2.3.relu3 (conv "
                 "7x7 stride 2, max pool, Flatten, Linear), 224x224",
                 ResNetOptions().depth(50));
  add_classifier(r, "inception_v3_cifar", family, make_inception_v3_cifar,
                 "torchvision's Inception-v3 with a stride-1 stem for 32x32 inputs");
  add_classifier(r, "inception_v3_cifar_earlyexit", family, make_inception_v3_cifar,
                 "inception_v3_cifar with the cascade's exits after its layers 4, 8, 12 and 16",
                 InceptionV3CifarOptions().exits(true));
  for (int64_t depth : {11, 13, 16, 19}) {
    const std::string d = std::to_string(depth);
    add_classifier(r, "vgg" + d, family, make_vgg, "torchvision VGG-" + d + " (no BN), 224x224",
                   VggOptions().depth(depth));
    add_classifier(r, "vgg" + d + "_bn", family, make_vgg,
                   "torchvision VGG-" + d + " with BN, 224x224",
                   VggOptions().depth(depth).batch_norm(true));
    for (bool bn : {false, true}) {
      const std::string name = "vgg" + d + (bn ? "_bn" : "") + "_cifar";
      if (name == "vgg16_cifar") continue;  // Li et al.'s; layout=distiller gives Distiller's
      add_classifier(
          r, name, family, make_vgg,
          "Distiller's CIFAR VGG-" + d + (bn ? " with BN" : "") + ", one fc, 32x32",
          VggOptions().depth(depth).batch_norm(bn).cifar(true).num_classes(10).input_size(32));
    }
  }
  add_classifier(r, "alexnet", family, make_alexnet, "torchvision AlexNet, 224x224");
  add_classifier(r, "alexnet_bn", family, make_alexnet_bn,
                 "Distiller's AlexNet with BatchNorm, 227x227");
  add_classifier(r, "mobilenet", family, make_mobilenet,
                 "Distiller's MobileNet v1 (channel_multiplier 1.0), 224x224");
  for (const auto& [suffix, multiplier] :
       {std::pair<const char*, double>{"025", 0.25}, {"050", 0.5}, {"075", 0.75}})
    add_classifier(r, std::string("mobilenet_") + suffix, family, make_mobilenet,
                   "Distiller's MobileNet v1, channel_multiplier " +
                       std::to_string(multiplier).substr(0, 4) + ", 224x224",
                   MobileNetOptions().channel_multiplier(multiplier));
  add_classifier(r, "mobilenet_v2", family, make_mobilenet_v2, "torchvision MobileNetV2, 224x224");
  add_classifier(r, "densenet_cifar", family, make_densenet_cifar,
                 "DenseNet-BC (depth 40, growth 12) for 32x32");
}

}  // namespace igb::models::classify
