// Distiller's MobileNet v1 (with a width multiplier) and torchvision's MobileNetV2 (width 1.0).
#include <algorithm>
#include <array>
#include <cmath>

#include "core/activation.h"
#include "core/sequential.h"
#include "models/classify/classifier.h"

namespace igb::models::classify {

namespace nn = torch::nn;

namespace {

/// conv (no bias) + BN + ReLU6, as torchvision's Conv2dNormActivation: children 0, 1, 2.
Sequential conv_bn_relu6(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups) {
  return Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, k)
                                   .stride(stride)
                                   .padding((k - 1) / 2)
                                   .groups(groups)
                                   .bias(false)),
                    nn::BatchNorm2d(out),
                    Activation(ActivationOptions(ActivationKind::kReLU6).inplace(true)));
}

/// `conv`: [expand 1x1 (when t ≠ 1)], depthwise 3x3, project 1x1, BN; residual when the shape
/// is kept.
class InvertedResidualImpl : public nn::Module {
 public:
  InvertedResidualImpl(int64_t in, int64_t out, int64_t stride, int64_t t)
      : residual_(stride == 1 && in == out) {
    const int64_t hidden = in * t;
    conv = Sequential();
    if (t != 1) conv->push_back(conv_bn_relu6(in, hidden, 1, 1, 1));
    conv->push_back(conv_bn_relu6(hidden, hidden, 3, stride, hidden));
    conv->push_back(nn::Conv2d(nn::Conv2dOptions(hidden, out, 1).bias(false)));
    conv->push_back(nn::BatchNorm2d(out));
    register_module("conv", conv);
  }
  torch::Tensor forward(torch::Tensor x) {
    return residual_ ? x + conv->forward(x) : conv->forward(x);
  }
  Sequential conv{nullptr};

 private:
  bool residual_;
};
TORCH_MODULE(InvertedResidual);

class MobileNetV2Impl : public ClassifierImpl {
 public:
  explicit MobileNetV2Impl(MobileNetV2Options o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    // t (expansion), c (channels), n (repeats), s (first stride).
    const int64_t settings[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                    {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
    features = Sequential();
    features->push_back(conv_bn_relu6(3, 32, 3, 2, 1));
    int64_t in = 32;
    for (const auto& s : settings) {
      for (int64_t i = 0; i < s[2]; ++i) {
        features->push_back(InvertedResidual(in, s[1], i == 0 ? s[3] : 1, s[0]));
        in = s[1];
      }
    }
    features->push_back(conv_bn_relu6(in, 1280, 1, 1, 1));
    register_module("features", features);
    avgpool = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    classifier = register_module("classifier",
                                 Sequential(nn::Dropout(0.2), nn::Linear(1280, o.num_classes())));
    torch::NoGradGuard no_grad;
    for (auto& m : modules(false)) {
      if (auto* c = m->as<nn::Conv2d>()) nn::init::kaiming_normal_(c->weight, 0, torch::kFanOut);
      if (auto* l = m->as<nn::Linear>()) {
        nn::init::normal_(l->weight, 0, 0.01);
        nn::init::zeros_(l->bias);
      }
    }
  }
  torch::Tensor forward_impl(torch::Tensor x) override {
    return classifier->forward(avgpool(features->forward(x)).flatten(1));
  }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  MobileNetV2Options options;
  Sequential features{nullptr}, classifier{nullptr};
  nn::AdaptiveAvgPool2d avgpool{nullptr};
};

/// conv (no bias), BN, ReLU: three consecutive children of a Sequential, as Distiller lays them.
void push_conv_bn_relu(Sequential& s, int64_t in, int64_t out, int64_t k, int64_t stride,
                       int64_t groups) {
  s->push_back(nn::Conv2d(
      nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).groups(groups).bias(false)));
  s->push_back(nn::BatchNorm2d(out));
  s->push_back(Activation(ActivationOptions(ActivationKind::kReLU).inplace(true)));
}

/// Distiller's MobileNet v1: `model.0` = conv 3x3/2 3→c0, BN, ReLU; `model.1` … `model.13` =
/// depthwise 3x3 (children 0, 1, 2) then pointwise 1x1 (3, 4, 5), each conv + BN + ReLU;
/// `model.14` the global average pool; `fc`.
class MobileNetImpl : public ClassifierImpl {
 public:
  explicit MobileNetImpl(MobileNetOptions o)
      : ClassifierImpl(o.num_classes(), 3, o.input_size()), options(o) {
    std::vector<int64_t> c;
    for (int64_t base : {32, 64, 128, 256, 512, 1024})
      c.push_back(std::max<int64_t>(
          static_cast<int64_t>(std::floor(static_cast<double>(base) * o.channel_multiplier())), 8));
    // (input width, output width, stride) of the 13 depthwise-separable blocks.
    const std::vector<std::array<int64_t, 3>> blocks = {
        {c[0], c[1], 1}, {c[1], c[2], 2}, {c[2], c[2], 1}, {c[2], c[3], 2}, {c[3], c[3], 1},
        {c[3], c[4], 2}, {c[4], c[4], 1}, {c[4], c[4], 1}, {c[4], c[4], 1}, {c[4], c[4], 1},
        {c[4], c[4], 1}, {c[4], c[5], 2}, {c[5], c[5], 1}};
    model = Sequential();
    Sequential stem;
    push_conv_bn_relu(stem, 3, c[0], 3, 2, 1);
    model->push_back(stem);
    for (const auto& [in, out, stride] : blocks) {
      Sequential block;
      push_conv_bn_relu(block, in, in, 3, stride, in);
      push_conv_bn_relu(block, in, out, 1, 1, 1);
      model->push_back(block);
    }
    // Distiller pools 7x7 (224x224 inputs); the adaptive pool gives the same there.
    model->push_back(nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions(1)));
    register_module("model", model);
    fc = register_module("fc", nn::Linear(c[5], o.num_classes()));
  }
  torch::Tensor forward_impl(torch::Tensor x) override { return fc(model->forward(x).flatten(1)); }
  nlohmann::json architecture_options_json() const override { return options_to_json(options); }

  MobileNetOptions options;
  Sequential model{nullptr};
  nn::Linear fc{nullptr};
};

}  // namespace

void MobileNetOptions::validate(const std::string& model) const {
  if (!(channel_multiplier_ > 0 && channel_multiplier_ <= 4))
    throw InputError("model " + model + ": option 'channel_multiplier' must be in (0, 4], got " +
                     std::to_string(channel_multiplier_));
}

Model make_mobilenet(const MobileNetOptions& options) {
  return std::make_shared<MobileNetImpl>(options);
}

Model make_mobilenet_v2(const MobileNetV2Options& options) {
  return std::make_shared<MobileNetV2Impl>(options);
}

}  // namespace igb::models::classify
