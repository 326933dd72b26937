// He et al. (2016) CIFAR ResNets: 6n + 2 layers, shortcuts on downsampling either zero-padded
// identities or Distiller's 1x1 conv + BN; and plain20_cifar, the same blocks without shortcuts.
#include "core/activation.h"
#include "core/channel_pad.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"
#include "models/classify/early_exit.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

nn::Conv2d conv3x3(int64_t in, int64_t out, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false));
}

/// What a block adds to its output: nothing (plain20_cifar), or the input through a zero-padded
/// identity or a 1x1 conv + BN where the width changes.
enum class Shortcut { kNone, kPad, kConv };

/// conv1, bn1, relu1, conv2, bn2, (+ shortcut or downsample), relu2.
class BasicBlockImpl : public nn::Module {
 public:
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride, Shortcut kind)
      : stride_(stride), residual_(kind != Shortcut::kNone) {
    conv1 = register_module("conv1", conv3x3(in, out, stride));
    bn1 = register_module("bn1", nn::BatchNorm2d(out));
    relu1 = register_module("relu1",
                            Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    conv2 = register_module("conv2", conv3x3(out, out, 1));
    bn2 = register_module("bn2", nn::BatchNorm2d(out));
    relu2 = register_module("relu2",
                            Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    if ((stride != 1 || in != out) && kind == Shortcut::kPad) {
      const int64_t pad = out - in;
      shortcut = register_module("shortcut", ChannelPad(pad / 2, pad - pad / 2));
    }
    if ((stride != 1 || in != out) && kind == Shortcut::kConv)
      downsample = register_module(
          "downsample",
          Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                     nn::BatchNorm2d(out)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = bn2(conv2(relu1(bn1(conv1(x)))));
    if (!residual_) return relu2(y);
    auto skip = x;
    if (downsample) skip = downsample->forward(x);
    if (shortcut) {
      // Option A: subsample, then zero-pad the new channels on both sides.
      skip = shortcut(x.slice(2, 0, c10::nullopt, stride_).slice(3, 0, c10::nullopt, stride_));
    }
    return relu2(y + skip);
  }

  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  Activation relu1{nullptr}, relu2{nullptr};
  /// The zero-padded shortcut of a block that changes width (absent otherwise).
  ChannelPad shortcut{nullptr};
  /// The 1x1 conv + BN shortcut of a block that changes width, with shortcut=conv.
  Sequential downsample{nullptr};

 private:
  int64_t stride_;
  bool residual_;
};
TORCH_MODULE(BasicBlock);

class ResNetCifarImpl : public ClassifierImpl {
 public:
  explicit ResNetCifarImpl(ResNetCifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    const int64_t n = (o.depth() - 2) / 6;
    const Shortcut kind = !o.residual()            ? Shortcut::kNone
                          : o.shortcut() == "conv" ? Shortcut::kConv
                                                   : Shortcut::kPad;
    conv1 = register_module("conv1", conv3x3(3, 16, 1));
    bn1 = register_module("bn1", nn::BatchNorm2d(16));
    relu =
        register_module("relu", Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
    int64_t in = 16;
    for (int64_t stage = 0; stage < 3; ++stage) {
      const int64_t out = 16 << stage;
      Sequential layer;
      for (int64_t b = 0; b < n; ++b) {
        layer->push_back(BasicBlock(in, out, (b == 0 && stage > 0) ? 2 : 1, kind));
        in = out;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(64, o.num_classes()));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false))
      if (auto* c = m->as<nn::Conv2d>())
        nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = relu(bn1(conv1(x)));
    for (auto& l : layers) x = l->forward(x);
    return fc(avgpool(x).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  ResNetCifarOptions options;

  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr};
  Activation relu{nullptr};
  std::vector<Sequential> layers;
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace

void ResNetCifarOptions::validate(const std::string& model) const {
  if (depth_ < 8 || (depth_ - 2) % 6 != 0)
    throw InputError("model " + model +
                     ": depth must be 6n + 2 with n >= 1 (8, 14, 20, 26, 32, …), got " +
                     std::to_string(depth_));
  if (shortcut_ != "pad" && shortcut_ != "conv")
    throw InputError("model " + model + ": option 'shortcut' must be pad or conv, got '" +
                     shortcut_ + "'");
}

Model make_resnet_cifar(const ResNetCifarOptions& options) {
  return std::make_shared<ResNetCifarImpl>(options);
}

Model make_resnet_cifar_earlyexit(const ResNetCifarOptions& options) {
  auto model = std::make_shared<ResNetCifarImpl>(options);
  attach_exits(*model, distiller_resnet_cifar_exits(options.num_classes(), options.input_size()));
  return model;
}

}  // namespace igb::models::classify
