// VGG-16: torchvision's ImageNet network and the CIFAR variant of Li et al. (2016).
#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

const std::vector<int64_t> kVgg16 = {64, 64,  -1,  128, 128, -1,  256, 256, 256,
                                     -1, 512, 512, 512, -1,  512, 512, 512, -1};

/// `features` holds conv (+ BN) + ReLU per layer and a max-pool at each -1 of the config.
Sequential vgg_features(bool batch_norm) {
  Sequential f;
  int64_t in = 3;
  for (int64_t c : kVgg16) {
    if (c < 0) {
      f->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
      continue;
    }
    f->push_back(nn::Conv2d(nn::Conv2dOptions(in, c, 3).padding(1)));
    if (batch_norm) f->push_back(nn::BatchNorm2d(c));
    f->push_back(Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    in = c;
  }
  return f;
}

/// torchvision vgg16: features (conv+ReLU, indices 0…30), avgpool to 7x7, classifier
/// (fc 25088→4096, ReLU, dropout, fc 4096→4096, ReLU, dropout, fc 4096→classes).
class Vgg16Impl : public ClassifierImpl {
 public:
  explicit Vgg16Impl(Vgg16Options o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    features = register_module("features", vgg_features(false));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(7)));
    classifier = register_module(
        "classifier", Sequential(nn::Linear(512 * 7 * 7, 4096),
                                 Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)),
                                 nn::Dropout(0.5), nn::Linear(4096, 4096),
                                 Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)),
                                 nn::Dropout(0.5), nn::Linear(4096, o.num_classes())));
  }
  torch::Tensor forward(torch::Tensor x) override {
    return classifier->forward(avgpool(features->forward(x)).flatten(1));
  }
  nlohmann::json options_json() const override { return options_to_json(options); }

  Vgg16Options options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
};

/// Li et al.'s VGG-16 for CIFAR: features (conv with bias, BN, ReLU per layer; max-pools after
/// convs 2, 4, 7, 10, 13), then classifier (fc 512→512, BN1d, ReLU, fc 512→classes).
class Vgg16CifarImpl : public ClassifierImpl {
 public:
  explicit Vgg16CifarImpl(Vgg16CifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    features = register_module("features", vgg_features(true));
    classifier = register_module(
        "classifier", Sequential(nn::Linear(512, 512), nn::BatchNorm1d(512),
                                 Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)),
                                 nn::Linear(512, o.num_classes())));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false))
      if (auto* c = m->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
        nn::init::zeros_(c->bias);
      }
  }
  torch::Tensor forward(torch::Tensor x) override {
    // Five 2x2 pools take 32x32 to 1x1; other sizes are averaged down to it.
    x = features->forward(x);
    if (x.size(2) != 1 || x.size(3) != 1) x = torch::adaptive_avg_pool2d(x, {1, 1});
    return classifier->forward(x.flatten(1));
  }
  nlohmann::json options_json() const override { return options_to_json(options); }

  Vgg16CifarOptions options;
  Sequential features{nullptr}, classifier{nullptr};
};

}  // namespace

Model make_vgg16(const Vgg16Options& options) { return std::make_shared<Vgg16Impl>(options); }

Model make_vgg16_cifar(const Vgg16CifarOptions& options) {
  return std::make_shared<Vgg16CifarImpl>(options);
}

}  // namespace igb::models::classify
