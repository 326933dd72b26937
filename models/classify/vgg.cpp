// VGG: torchvision's ImageNet networks (11, 13, 16, 19 layers, with or without BN) and the CIFAR
// VGG-16 of Li et al. (2016).
#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// torchvision's configurations A, B, D, E: conv widths, -1 for a 2x2 max-pool.
std::vector<int64_t> vgg_config(int64_t depth) {
  switch (depth) {
    case 11:
      return {64, -1, 128, -1, 256, 256, -1, 512, 512, -1, 512, 512, -1};
    case 13:
      return {64, 64, -1, 128, 128, -1, 256, 256, -1, 512, 512, -1, 512, 512, -1};
    case 19:
      return {64,  64,  -1,  128, 128, -1,  256, 256, 256, 256, -1,
              512, 512, 512, 512, -1,  512, 512, 512, 512, -1};
    default:
      return {64, 64, -1, 128, 128, -1, 256, 256, 256, -1, 512, 512, 512, -1, 512, 512, 512, -1};
  }
}

/// `features` holds conv (+ BN) + ReLU per layer and a max-pool at each -1 of the config.
Sequential vgg_features(const std::vector<int64_t>& config, bool batch_norm) {
  Sequential f;
  int64_t in = 3;
  for (int64_t c : config) {
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

/// torchvision vgg: features (conv (+BN) + ReLU, max-pools; vgg16's convs at 0, 2, 5, …, 28),
/// avgpool to 7x7, classifier (fc 25088→4096, ReLU, dropout, fc 4096→4096, ReLU, dropout,
/// fc 4096→classes).
class VggImpl : public ClassifierImpl {
 public:
  explicit VggImpl(VggOptions o) : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    features = register_module("features", vgg_features(vgg_config(o.depth()), o.batch_norm()));
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

  VggOptions options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
};

/// Li et al.'s VGG-16 for CIFAR: features (conv with bias, BN, ReLU per layer; max-pools after
/// convs 2, 4, 7, 10, 13), then classifier (fc 512→512, BN1d, ReLU, fc 512→classes).
class Vgg16CifarImpl : public ClassifierImpl {
 public:
  explicit Vgg16CifarImpl(Vgg16CifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    features = register_module("features", vgg_features(vgg_config(16), true));
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

void VggOptions::validate(const std::string& model) const {
  if (depth_ != 11 && depth_ != 13 && depth_ != 16 && depth_ != 19)
    throw InputError("model " + model + ": depth must be 11, 13, 16 or 19, got " +
                     std::to_string(depth_));
}

Model make_vgg(const VggOptions& options) { return std::make_shared<VggImpl>(options); }

Model make_vgg16_cifar(const Vgg16CifarOptions& options) {
  return std::make_shared<Vgg16CifarImpl>(options);
}

}  // namespace igb::models::classify
