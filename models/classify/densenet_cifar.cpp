// DenseNet-BC (Huang et al. 2017) for 32x32 inputs: depth 40, growth rate 12, compression 0.5.
#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// BN, ReLU, conv 1x1 (4k), BN, ReLU, conv 3x3 (k); output concatenated to the input.
/// Layers: bn1, relu1, conv1, bn2, relu2, conv2.
class DenseLayerImpl : public nn::Module {
 public:
  DenseLayerImpl(int64_t in, int64_t growth) {
    bn1 = register_module("bn1", nn::BatchNorm2d(in));
    relu1 = register_module("relu1",
                            Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(in, 4 * growth, 1).bias(false)));
    bn2 = register_module("bn2", nn::BatchNorm2d(4 * growth));
    relu2 = register_module("relu2",
                            Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    conv2 = register_module(
        "conv2", nn::Conv2d(nn::Conv2dOptions(4 * growth, growth, 3).padding(1).bias(false)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = conv2(relu2(bn2(conv1(relu1(bn1(x))))));
    return torch::cat({x, y}, 1);
  }
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  Activation relu1{nullptr}, relu2{nullptr};
};
TORCH_MODULE(DenseLayer);

/// BN, ReLU, conv 1x1 (compression), average pool 2. Layers: bn, relu, conv, pool.
class TransitionImpl : public nn::Module {
 public:
  TransitionImpl(int64_t in, int64_t out) {
    bn = register_module("bn", nn::BatchNorm2d(in));
    relu =
        register_module("relu", Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, 1).bias(false)));
    pool = register_module("pool", nn::AvgPool2d(nn::AvgPool2dOptions(2)));
  }
  torch::Tensor forward(torch::Tensor x) { return pool(conv(relu(bn(x)))); }
  nn::BatchNorm2d bn{nullptr};
  Activation relu{nullptr};
  nn::Conv2d conv{nullptr};
  nn::AvgPool2d pool{nullptr};
};
TORCH_MODULE(Transition);

/// conv1 (3→2k), dense1, trans1, dense2, trans2, dense3, bn, relu, avgpool, fc.
class DenseNetCifarImpl : public ClassifierImpl {
 public:
  explicit DenseNetCifarImpl(DenseNetCifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    const int64_t growth = o.growth();
    const int64_t layers_per_block = (o.depth() - 4) / 6;
    int64_t c = 2 * growth;
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, c, 3).padding(1).bias(false)));
    for (int64_t b = 0; b < 3; ++b) {
      Sequential block;
      for (int64_t i = 0; i < layers_per_block; ++i) {
        block->push_back(DenseLayer(c, growth));
        c += growth;
      }
      dense.push_back(register_module("dense" + std::to_string(b + 1), block));
      if (b < 2) {
        trans.push_back(register_module("trans" + std::to_string(b + 1), Transition(c, c / 2)));
        c /= 2;
      }
    }
    bn = register_module("bn", nn::BatchNorm2d(c));
    relu =
        register_module("relu", Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(c, o.num_classes()));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false))
      if (auto* conv = m->as<nn::Conv2d>())
        nn::init::kaiming_normal_(conv->weight, 0, torch::kFanOut, torch::kReLU);
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = conv1(x);
    for (size_t b = 0; b < dense.size(); ++b) {
      x = dense[b]->forward(x);
      if (b < trans.size()) x = trans[b]->forward(x);
    }
    return fc(avgpool(relu(bn(x))).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  DenseNetCifarOptions options;

  nn::Conv2d conv1{nullptr};
  std::vector<Sequential> dense;
  std::vector<Transition> trans;
  nn::BatchNorm2d bn{nullptr};
  Activation relu{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace

void DenseNetCifarOptions::validate(const std::string& model) const {
  if (depth_ < 10 || (depth_ - 4) % 6 != 0)
    throw InputError("model " + model +
                     ": depth must be 6n + 4 with n >= 1 (10, 16, 22, 28, 34, 40, …), got " +
                     std::to_string(depth_));
}

Model make_densenet_cifar(const DenseNetCifarOptions& options) {
  return std::make_shared<DenseNetCifarImpl>(options);
}

}  // namespace igb::models::classify
