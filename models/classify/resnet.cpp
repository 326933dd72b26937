// torchvision's ResNet-18/34/50 (v1.5: the stride of a bottleneck sits on its 3x3 conv).
#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"
#include "models/classify/early_exit.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// Basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 ×4) block with an optional projection shortcut
/// `downsample` (conv 1x1 + BN). Layers: conv1, bn1, relu1, conv2, bn2, relu2, [conv3, bn3, relu3].
class BlockImpl : public nn::Module {
 public:
  BlockImpl(bool bottleneck, int64_t in, int64_t planes, int64_t stride) : bottleneck_(bottleneck) {
    const int64_t out = bottleneck ? planes * 4 : planes;
    if (bottleneck) {
      conv1 = register_module("conv1", padded_conv(in, planes, 1, 1));
      bn1 = register_module("bn1", nn::BatchNorm2d(planes));
      relu1 = register_module("relu1",
                              Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
      conv2 = register_module("conv2", padded_conv(planes, planes, 3, stride));
      bn2 = register_module("bn2", nn::BatchNorm2d(planes));
      relu2 = register_module("relu2",
                              Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
      conv3 = register_module("conv3", padded_conv(planes, out, 1, 1));
      bn3 = register_module("bn3", nn::BatchNorm2d(out));
      relu3 = register_module("relu3",
                              Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    } else {
      conv1 = register_module("conv1", padded_conv(in, planes, 3, stride));
      bn1 = register_module("bn1", nn::BatchNorm2d(planes));
      relu1 = register_module("relu1",
                              Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
      conv2 = register_module("conv2", padded_conv(planes, planes, 3, 1));
      bn2 = register_module("bn2", nn::BatchNorm2d(planes));
      relu2 = register_module("relu2",
                              Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    }
    if (stride != 1 || in != out)
      downsample = register_module(
          "downsample", Sequential(padded_conv(in, out, 1, stride), nn::BatchNorm2d(out)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = relu1(bn1(conv1(x)));
    y = bn2(conv2(y));
    if (bottleneck_) y = bn3(conv3(relu2(y)));
    auto identity = downsample ? downsample->forward(x) : x;
    return bottleneck_ ? relu3(y + identity) : relu2(y + identity);
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr}, bn3{nullptr};
  Activation relu1{nullptr}, relu2{nullptr}, relu3{nullptr};
  Sequential downsample{nullptr};

 private:
  bool bottleneck_;
};
TORCH_MODULE(Block);

class ResNetImpl : public ClassifierImpl {
 public:
  explicit ResNetImpl(ResNetOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    const int64_t depth = o.depth();
    const bool bottleneck = depth >= 50;
    const std::vector<int64_t> blocks =
        depth == 18 ? std::vector<int64_t>{2, 2, 2, 2} : std::vector<int64_t>{3, 4, 6, 3};
    conv1 = register_module(
        "conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    relu =
        register_module("relu", Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    maxpool =
        register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t in = 64;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const int64_t planes = 64 << stage;
      Sequential layer;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        layer->push_back(Block(bottleneck, in, planes, (b == 0 && stage > 0) ? 2 : 1));
        in = bottleneck ? planes * 4 : planes;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(in, o.num_classes()));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false))
      if (auto* c = m->as<nn::Conv2d>())
        nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = maxpool(relu(bn1(conv1(x))));
    for (auto& l : layers) x = l->forward(x);
    return fc(avgpool(x).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  ResNetOptions options;

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  Activation relu{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  std::vector<Sequential> layers;
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace

void ResNetOptions::validate(const std::string& model) const {
  if (depth_ != 18 && depth_ != 34 && depth_ != 50)
    throw InputError("model " + model + ": depth must be 18, 34 or 50, got " +
                     std::to_string(depth_));
}

Model make_resnet(const ResNetOptions& options) { return std::make_shared<ResNetImpl>(options); }

Model make_resnet_earlyexit(const ResNetOptions& options) {
  if (options.depth() != 50)
    throw InputError("Distiller's early exits are placed on resnet50 only");
  auto model = std::make_shared<ResNetImpl>(options);
  attach_exits(*model, distiller_resnet50_exits(options.num_classes(), options.input_size()));
  return model;
}

}  // namespace igb::models::classify
