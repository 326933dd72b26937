// Distiller's pre-activation ResNets (He et al. 2016, "Identity Mappings in Deep Residual
// Networks"): BN and ReLU before each conv, the residual stream left unnormalised until final_bn.
#include "core/activation.h"
#include "core/channel_pad.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

Activation make_relu(bool inplace) {
  return Activation(ActivationOptions(ActivationKind::kReLU).inplace(inplace));
}

/// CIFAR block: pre_bn, pre_relu, conv1, bn, relu, conv2, plus the shortcut. Where the width
/// changes, `downsample` is a 1x1 conv of the pre-activated input (shortcut=conv) or, by
/// default, a 2x2 average pool of the raw input followed by zero channels on both sides.
class PreactCifarBlockImpl : public nn::Module {
 public:
  PreactCifarBlockImpl(int64_t in, int64_t out, int64_t stride, bool conv_shortcut) {
    pre_bn = register_module("pre_bn", nn::BatchNorm2d(in));
    pre_relu = register_module("pre_relu", make_relu(false));
    conv1 = register_module("conv1", padded_conv(in, out, 3, stride));
    bn = register_module("bn", nn::BatchNorm2d(out));
    relu = register_module("relu", make_relu(true));
    conv2 = register_module("conv2", padded_conv(out, out, 3, 1));
    if (stride != 1 || in != out) {
      if (conv_shortcut) {
        downsample_conv = register_module("downsample", padded_conv(in, out, 1, stride));
      } else {
        const int64_t pad = out - in;
        downsample_pad = register_module(
            "downsample", Sequential(nn::AvgPool2d(nn::AvgPool2dOptions(2).stride(2)),
                                     ChannelPad(pad / 2, pad - pad / 2)));
      }
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto preact = pre_relu(pre_bn(x));
    auto out = conv2(relu(bn(conv1(preact))));
    if (downsample_conv) return out + downsample_conv(preact);
    if (downsample_pad) return out + downsample_pad->forward(x);
    return out + x;
  }

  nn::BatchNorm2d pre_bn{nullptr}, bn{nullptr};
  Activation pre_relu{nullptr}, relu{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr};
  nn::Conv2d downsample_conv{nullptr};
  Sequential downsample_pad{nullptr};
};
TORCH_MODULE(PreactCifarBlock);

class PreactResNetCifarImpl : public ClassifierImpl {
 public:
  explicit PreactResNetCifarImpl(PreactResNetCifarOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    const int64_t n = (o.depth() - 2) / 6;
    conv1 = register_module("conv1", padded_conv(3, 16, 3, 1));
    int64_t in = 16;
    for (int64_t stage = 0; stage < 3; ++stage) {
      const int64_t out = 16 << stage;
      Sequential layer;
      for (int64_t b = 0; b < n; ++b) {
        layer->push_back(
            PreactCifarBlock(in, out, (b == 0 && stage > 0) ? 2 : 1, o.shortcut() == "conv"));
        in = out;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    final_bn = register_module("final_bn", nn::BatchNorm2d(64));
    final_relu = register_module("final_relu", make_relu(true));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(64, o.num_classes()));
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = conv1(x);
    for (auto& l : layers) x = l->forward(x);
    return fc(avgpool(final_relu(final_bn(x))).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  PreactResNetCifarOptions options;
  nn::Conv2d conv1{nullptr};
  std::vector<Sequential> layers;
  nn::BatchNorm2d final_bn{nullptr};
  Activation final_relu{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

/// ImageNet block, basic (conv1 3x3, bn1_2, relu1_2, conv2 3x3) or bottleneck (conv1 1x1,
/// bn1_2, relu1_2, conv2 3x3, bn2_3, relu2_3, conv3 1x1 ×4), after pre_bn and pre_relu unless
/// it is the first block of layer1 (the stem's BN and ReLU precede it). `downsample.0` is a 1x1
/// conv of the pre-activated input where the shape changes.
class PreactBlockImpl : public nn::Module {
 public:
  PreactBlockImpl(bool bottleneck, int64_t in, int64_t planes, int64_t stride, bool preactivate)
      : bottleneck_(bottleneck) {
    const int64_t out = bottleneck ? planes * 4 : planes;
    if (preactivate) {
      pre_bn = register_module("pre_bn", nn::BatchNorm2d(in));
      pre_relu = register_module("pre_relu", make_relu(false));
    }
    if (bottleneck) {
      conv1 = register_module("conv1", padded_conv(in, planes, 1, 1));
      bn1_2 = register_module("bn1_2", nn::BatchNorm2d(planes));
      relu1_2 = register_module("relu1_2", make_relu(true));
      conv2 = register_module("conv2", padded_conv(planes, planes, 3, stride));
      bn2_3 = register_module("bn2_3", nn::BatchNorm2d(planes));
      relu2_3 = register_module("relu2_3", make_relu(true));
      conv3 = register_module("conv3", padded_conv(planes, out, 1, 1));
    } else {
      conv1 = register_module("conv1", padded_conv(in, planes, 3, stride));
      bn1_2 = register_module("bn1_2", nn::BatchNorm2d(planes));
      relu1_2 = register_module("relu1_2", make_relu(true));
      conv2 = register_module("conv2", padded_conv(planes, planes, 3, 1));
    }
    if (stride != 1 || in != out)
      downsample = register_module("downsample", Sequential(padded_conv(in, out, 1, stride)));
  }
  torch::Tensor forward(torch::Tensor x) {
    auto preact = pre_bn ? pre_relu(pre_bn(x)) : x;
    auto out = relu1_2(bn1_2(conv1(preact)));
    out = conv2(out);
    if (bottleneck_) out = conv3(relu2_3(bn2_3(out)));
    return out + (downsample ? downsample->forward(preact) : x);
  }

  nn::BatchNorm2d pre_bn{nullptr}, bn1_2{nullptr}, bn2_3{nullptr};
  Activation pre_relu{nullptr}, relu1_2{nullptr}, relu2_3{nullptr};
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  Sequential downsample{nullptr};

 private:
  bool bottleneck_;
};
TORCH_MODULE(PreactBlock);

class PreactResNetImpl : public ClassifierImpl {
 public:
  explicit PreactResNetImpl(PreactResNetOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    const bool bottleneck = o.depth() >= 50;
    const std::vector<int64_t> blocks =
        o.depth() == 18 ? std::vector<int64_t>{2, 2, 2, 2} : std::vector<int64_t>{3, 4, 6, 3};
    conv1 = register_module("conv1", padded_conv(3, 64, 7, 2));
    bn1 = register_module("bn1", nn::BatchNorm2d(64));
    relu1 = register_module("relu1", make_relu(true));
    maxpool =
        register_module("maxpool", nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    int64_t in = 64;
    for (int64_t stage = 0; stage < 4; ++stage) {
      const int64_t planes = 64 << stage;
      const int64_t stride = stage > 0 ? 2 : 1;
      Sequential layer;
      for (int64_t b = 0; b < blocks[stage]; ++b) {
        layer->push_back(
            PreactBlock(bottleneck, in, planes, b == 0 ? stride : 1, b > 0 || stride != 1));
        in = bottleneck ? planes * 4 : planes;
      }
      layers.push_back(register_module("layer" + std::to_string(stage + 1), layer));
    }
    final_bn = register_module("final_bn", nn::BatchNorm2d(in));
    final_relu = register_module("final_relu", make_relu(true));
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    fc = register_module("fc", nn::Linear(in, o.num_classes()));
    // As Distiller initialises it: N(0, sqrt(2 / (k·k·out))) for convs.
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false))
      if (auto* c = m->as<nn::Conv2d>())
        nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut, torch::kReLU);
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    x = maxpool(relu1(bn1(conv1(x))));
    for (auto& l : layers) x = l->forward(x);
    return fc(avgpool(final_relu(final_bn(x))).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  PreactResNetOptions options;
  nn::Conv2d conv1{nullptr};
  nn::BatchNorm2d bn1{nullptr}, final_bn{nullptr};
  Activation relu1{nullptr}, final_relu{nullptr};
  nn::MaxPool2d maxpool{nullptr};
  std::vector<Sequential> layers;
  nn::AdaptiveAvgPool2d avgpool{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace

void PreactResNetCifarOptions::validate(const std::string& model) const {
  if (depth_ < 8 || (depth_ - 2) % 6 != 0)
    throw InputError("model " + model +
                     ": depth must be 6n + 2 with n >= 1 (8, 14, 20, 26, 32, …), got " +
                     std::to_string(depth_));
  if (shortcut_ != "pad" && shortcut_ != "conv")
    throw InputError("model " + model + ": option 'shortcut' must be pad or conv, got '" +
                     shortcut_ + "'");
}

void PreactResNetOptions::validate(const std::string& model) const {
  if (depth_ != 18 && depth_ != 34 && depth_ != 50)
    throw InputError("model " + model + ": depth must be 18, 34 or 50, got " +
                     std::to_string(depth_));
}

Model make_preact_resnet_cifar(const PreactResNetCifarOptions& options) {
  return std::make_shared<PreactResNetCifarImpl>(options);
}

Model make_preact_resnet(const PreactResNetOptions& options) {
  return std::make_shared<PreactResNetImpl>(options);
}

}  // namespace igb::models::classify
