// simplenet_cifar and simplenet_mnist (Distiller's) and LeNet-5.
#include "core/activation.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// What tells simplenet_cifar and lenet5 apart besides their options.
struct TwoConvLayout {
  const char* name;
  int64_t in_channels;
  int64_t conv1_padding;
};

/// conv(k5) → act → maxpool 2 → conv(k5) → act → maxpool 2 → fc → act → fc → act → fc.
/// Layers: conv1, relu1, pool1, conv2, relu2, pool2, fc1, relu3, fc2, relu4, fc3.
template <class Options>
class TwoConvNetImpl : public ClassifierImpl {
 public:
  TwoConvNetImpl(Options o, TwoConvLayout layout)
      : ClassifierImpl(o.num_classes(), layout.in_channels, o.input_size()), options(o) {
    const int64_t in_channels = layout.in_channels, conv1_padding = layout.conv1_padding;
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(in_channels, 6, 5).padding(conv1_padding)));
    relu1 = register_module("relu1", Activation(ActivationKind::kReLU));
    pool1 = register_module("pool1", nn::MaxPool2d(nn::MaxPool2dOptions(2)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(6, 16, 5)));
    relu2 = register_module("relu2", Activation(ActivationKind::kReLU));
    pool2 = register_module("pool2", nn::MaxPool2d(nn::MaxPool2dOptions(2)));
    int64_t side = ((o.input_size() + 2 * conv1_padding - 4) / 2 - 4) / 2;
    if (side < 1)
      throw InputError("model " + std::string(layout.name) + ": input_size " +
                       std::to_string(o.input_size()) + " is too small");
    fc1 = register_module("fc1", nn::Linear(16 * side * side, 120));
    relu3 = register_module("relu3", Activation(ActivationKind::kReLU));
    fc2 = register_module("fc2", nn::Linear(120, 84));
    relu4 = register_module("relu4", Activation(ActivationKind::kReLU));
    fc3 = register_module("fc3", nn::Linear(84, o.num_classes()));
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = pool1(relu1(conv1(x)));
    x = pool2(relu2(conv2(x)));
    x = x.flatten(1);
    return fc3(relu4(fc2(relu3(fc1(x)))));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  Options options;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  nn::MaxPool2d pool1{nullptr}, pool2{nullptr};
  Activation relu1{nullptr}, relu2{nullptr}, relu3{nullptr}, relu4{nullptr};
};

/// Distiller's simplenet_mnist (PyTorch's MNIST example): conv1 1→20 k5, relu1, pool1 2, conv2
/// 20→50 k5, relu2, pool2 2, fc1 800→500, relu3, fc2 500→classes, log-softmax.
class SimpleNetMnistImpl : public ClassifierImpl {
 public:
  explicit SimpleNetMnistImpl(SimpleNetMnistOptions o)
      : ClassifierImpl(o.num_classes(), 1, o.input_size()), options(o) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 20, 5)));
    relu1 = register_module("relu1", Activation(ActivationKind::kReLU));
    pool1 = register_module("pool1", nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(20, 50, 5)));
    relu2 = register_module("relu2", Activation(ActivationKind::kReLU));
    pool2 = register_module("pool2", nn::MaxPool2d(nn::MaxPool2dOptions(2).stride(2)));
    const int64_t side = ((o.input_size() - 4) / 2 - 4) / 2;
    fc1 = register_module("fc1", nn::Linear(50 * side * side, 500));
    relu3 = register_module("relu3", Activation(ActivationKind::kReLU));
    fc2 = register_module("fc2", nn::Linear(500, o.num_classes()));
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = pool1(relu1(conv1(x)));
    x = pool2(relu2(conv2(x)));
    // Log-probabilities, as Distiller's model returns; cross-entropy on them equals cross-entropy
    // on the logits, since log_softmax leaves log-probabilities unchanged.
    return torch::log_softmax(fc2(relu3(fc1(x.flatten(1)))), 1);
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  SimpleNetMnistOptions options;
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Linear fc1{nullptr}, fc2{nullptr};
  nn::MaxPool2d pool1{nullptr}, pool2{nullptr};
  Activation relu1{nullptr}, relu2{nullptr}, relu3{nullptr};
};

}  // namespace

Model make_simplenet_mnist(const SimpleNetMnistOptions& options) {
  return std::make_shared<SimpleNetMnistImpl>(options);
}

Model make_simplenet_cifar(const SimpleNetCifarOptions& options) {
  return std::make_shared<TwoConvNetImpl<SimpleNetCifarOptions>>(
      options, TwoConvLayout{"simplenet_cifar", 3, 0});
}

Model make_lenet5(const LeNet5Options& options) {
  return std::make_shared<TwoConvNetImpl<LeNet5Options>>(options, TwoConvLayout{"lenet5", 1, 2});
}

}  // namespace igb::models::classify
