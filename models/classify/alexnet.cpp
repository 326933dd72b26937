// torchvision's AlexNet.
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
  torch::Tensor forward(torch::Tensor x) override {
    return classifier->forward(avgpool(features->forward(x)).flatten(1));
  }
  nlohmann::json options_json() const override { return options_to_json(options); }

  AlexNetOptions options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
};

}  // namespace

Model make_alexnet(const AlexNetOptions& options) { return std::make_shared<AlexNetImpl>(options); }

}  // namespace igb::models::classify
