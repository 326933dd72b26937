// VGG: torchvision's ImageNet networks (11, 13, 16, 19 layers, with or without BN), Distiller's
// CIFAR VGGs (the same features, one fc) and the CIFAR VGG-16 of Li et al. (2016).
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

/// The classifier after `features`: torchvision's three fc layers (after a 7x7 average pool), Li
/// et al.'s fc 512→512, BN1d, ReLU, fc (Sequential children 0…3), or Distiller's CIFAR VGGs' one
/// fc 512→classes named `classifier`. The CIFAR heads take the features at 1x1.
enum class VggHead { kImageNet, kLi, kCifarLinear };

struct VggLayout {
  int64_t depth;
  bool batch_norm;
  VggHead head;
};

template <class Options>
class VggImpl : public ClassifierImpl {
 public:
  VggImpl(Options o, VggLayout layout)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o), head_(layout.head) {
    auto relu = [] { return Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)); };
    features =
        register_module("features", vgg_features(vgg_config(layout.depth), layout.batch_norm));
    switch (head_) {
      case VggHead::kImageNet:
        avgpool =
            register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(7)));
        classifier = register_module(
            "classifier", Sequential(nn::Linear(512 * 7 * 7, 4096), relu(), nn::Dropout(0.5),
                                     nn::Linear(4096, 4096), relu(), nn::Dropout(0.5),
                                     nn::Linear(4096, o.num_classes())));
        break;
      case VggHead::kLi:
        classifier =
            register_module("classifier", Sequential(nn::Linear(512, 512), nn::BatchNorm1d(512),
                                                     relu(), nn::Linear(512, o.num_classes())));
        break;
      case VggHead::kCifarLinear:
        fc = register_module("classifier", nn::Linear(512, o.num_classes()));
        break;
    }
    if (head_ == VggHead::kLi) {
      torch::NoGradGuard no_grad;
      for (auto& m : modules(false))
        if (auto* c = m->template as<nn::Conv2d>()) {
          nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
          nn::init::zeros_(c->bias);
        }
    }
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = features->forward(x);
    if (head_ == VggHead::kImageNet) return classifier->forward(avgpool(x).flatten(1));
    // Five 2x2 pools take 32x32 to 1x1; other sizes are averaged down to it.
    if (x.size(2) != 1 || x.size(3) != 1) x = torch::adaptive_avg_pool2d(x, {1, 1});
    return fc ? fc(x.flatten(1)) : classifier->forward(x.flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  Options options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  /// Distiller's CIFAR classifier (registered as `classifier`).
  nn::Linear fc{nullptr};

 private:
  VggHead head_;
};

}  // namespace

void VggOptions::validate(const std::string& model) const {
  if (depth_ != 11 && depth_ != 13 && depth_ != 16 && depth_ != 19)
    throw InputError("model " + model + ": depth must be 11, 13, 16 or 19, got " +
                     std::to_string(depth_));
}

Model make_vgg(const VggOptions& options) {
  return std::make_shared<VggImpl<VggOptions>>(
      options, VggLayout{options.depth(), options.batch_norm(),
                         options.cifar() ? VggHead::kCifarLinear : VggHead::kImageNet});
}

void Vgg16CifarOptions::validate(const std::string& model) const {
  if (layout_ != "li" && layout_ != "distiller")
    throw InputError("model " + model + ": option 'layout' must be li or distiller, got '" +
                     layout_ + "'");
}

Model make_vgg16_cifar(const Vgg16CifarOptions& options) {
  const bool li = options.layout() == "li";
  return std::make_shared<VggImpl<Vgg16CifarOptions>>(
      options, VggLayout{16, li, li ? VggHead::kLi : VggHead::kCifarLinear});
}

}  // namespace igb::models::classify
