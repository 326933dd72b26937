// torchvision's AlexNet and Distiller's AlexNet with BatchNorm (alexnet_bn).
#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// features (5 convs with ReLU, 3 max-pools), avgpool to 6x6, classifier (dropout, fc 9216→4096,
/// ReLU, dropout, fc 4096→4096, ReLU, fc 4096→classes).
class AlexNetImpl : public ClassifierImpl {
 public:
  explicit AlexNetImpl(AlexNetOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    auto relu = [] { return Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)); };
    auto pool = [] { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)); };
    features = register_module(
        "features",
        Sequential(nn::Conv2d(nn::Conv2dOptions(3, 64, 11).stride(4).padding(2)), relu(), pool(),
                   nn::Conv2d(nn::Conv2dOptions(64, 192, 5).padding(2)), relu(), pool(),
                   nn::Conv2d(nn::Conv2dOptions(192, 384, 3).padding(1)), relu(),
                   nn::Conv2d(nn::Conv2dOptions(384, 256, 3).padding(1)), relu(),
                   nn::Conv2d(nn::Conv2dOptions(256, 256, 3).padding(1)), relu(), pool()));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(6)));
    classifier =
        register_module("classifier", Sequential(nn::Dropout(0.5), nn::Linear(256 * 6 * 6, 4096),
                                                 relu(), nn::Dropout(0.5), nn::Linear(4096, 4096),
                                                 relu(), nn::Linear(4096, o.num_classes())));
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    return classifier->forward(avgpool(features->forward(x)).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  AlexNetOptions options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
};

/// Distiller's alexnet_bn: features (conv 11x11/4 3→96 unpadded, conv 5x5 →256, conv 3x3 →384,
/// →384, →256, each followed by BN and ReLU; max-pools 3/2 after the first, second and last),
/// classifier (fc 9216→4096, BN1d, ReLU, fc 4096→4096, BN1d, ReLU, fc 4096→classes, BN1d).
class AlexNetBnImpl : public ClassifierImpl {
 public:
  explicit AlexNetBnImpl(AlexNetBnOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    auto relu = [] { return Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)); };
    auto pool = [] { return nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)); };
    auto conv = [](int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
      return nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(pad));
    };
    features = register_module(
        "features", Sequential(conv(3, 96, 11, 4, 0), nn::BatchNorm2d(96), relu(), pool(),
                               conv(96, 256, 5, 1, 2), nn::BatchNorm2d(256), relu(), pool(),
                               conv(256, 384, 3, 1, 1), nn::BatchNorm2d(384), relu(),
                               conv(384, 384, 3, 1, 1), nn::BatchNorm2d(384), relu(),
                               conv(384, 256, 3, 1, 1), nn::BatchNorm2d(256), relu(), pool()));
    classifier = register_module(
        "classifier",
        Sequential(nn::Linear(256 * 6 * 6, 4096), nn::BatchNorm1d(4096), relu(),
                   nn::Linear(4096, 4096), nn::BatchNorm1d(4096), relu(),
                   nn::Linear(4096, o.num_classes()), nn::BatchNorm1d(o.num_classes())));
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    // 227x227 inputs end at 6x6, as fc 9216→4096 needs; other sides are averaged to it.
    x = features->forward(x);
    if (x.size(2) != 6 || x.size(3) != 6) x = torch::adaptive_avg_pool2d(x, {6, 6});
    return classifier->forward(x.flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  AlexNetBnOptions options;
  Sequential features{nullptr}, classifier{nullptr};
};

}  // namespace

Model make_alexnet_bn(const AlexNetBnOptions& options) {
  return std::make_shared<AlexNetBnImpl>(options);
}

Model make_alexnet(const AlexNetOptions& options) { return std::make_shared<AlexNetImpl>(options); }

}  // namespace igb::models::classify
