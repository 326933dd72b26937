#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <string>

#include "models/model.h"

namespace igb::models::classify {

// Options of the classification models, one struct per architecture. Each lists its model args
// (and checkpoint keys) once, in visit(); see options_from_json in models/model.h.
//
//   auto model = make_densenet_cifar(DenseNetCifarOptions().depth(16).num_classes(100));

/// Range of `num_classes`, the option every classifier has.
inline constexpr OptionBounds kNumClassesBounds{1, 100000};
/// Largest `input_size` any classifier accepts, in pixels.
inline constexpr int64_t kMaxInputSize = 4096;

/// simplenet_cifar (Distiller's 2 conv + 3 fc network on 3-channel images).
struct SimpleNetCifarOptions {
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 16 … 4096 (fc1's width follows it). Default 32.
  TORCH_ARG(int64_t, input_size) = 32;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{16, kMaxInputSize});
  }
};

/// lenet5 (the simplenet layout on 1-channel images, conv1 padded by 2).
struct LeNet5Options {
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 12 … 4096 (fc1's width follows it). Default 28.
  TORCH_ARG(int64_t, input_size) = 28;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{12, kMaxInputSize});
  }
};

/// simplenet_mnist (Distiller's: PyTorch's MNIST example network, 2 conv + 2 fc).
struct SimpleNetMnistOptions {
  /// Output classes (log-probabilities), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 16 … 4096 (fc1's width follows it). Default 28.
  TORCH_ARG(int64_t, input_size) = 28;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{16, kMaxInputSize});
  }
};

/// resnet20_cifar … resnet110_cifar (He et al. 2016) and plain20_cifar (the same without
/// shortcuts).
struct ResNetCifarOptions {
  /// Layers, 6n + 2 (n basic blocks per stage). Fixed by the registry name (resnet56_cifar → 56),
  /// so it is neither a model arg nor a checkpoint key. Default 20.
  TORCH_ARG(int64_t, depth) = 20;
  /// Whether the blocks have shortcuts at all (false: plain20_cifar). Fixed by the registry name,
  /// neither a model arg nor a checkpoint key. Default true.
  TORCH_ARG(bool, residual) = true;
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 8 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;
  /// Shortcut of the blocks that change width: "pad" (subsample and zero-pad the new channels, a
  /// `ChannelPad` named `layerN.0.shortcut`) or "conv" (Distiller's: 1×1 conv, stride 2, and
  /// BatchNorm, named `layerN.0.downsample.0` and `.1`). Ignored by plain20_cifar. Default "pad".
  TORCH_ARG(std::string, shortcut) = "pad";

 public:
  /// Each option as (JSON key, field, bounds); depth and residual are not ones (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{8, kMaxInputSize});
    if (residual_) f("shortcut", shortcut_);
  }
  void validate(const std::string& model) const;
};

/// preact_resnet20_cifar … preact_resnet110_cifar (He et al. 2016b, Distiller's pre-activation
/// CIFAR ResNets).
struct PreactResNetCifarOptions {
  /// Layers, 6n + 2 (n blocks per stage). Fixed by the registry name, so it is neither a model
  /// arg nor a checkpoint key. Default 20.
  TORCH_ARG(int64_t, depth) = 20;
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 8 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;
  /// Shortcut of the blocks that change width: "pad" (2×2 average pool of the block input, then
  /// zero-padded channels: `layerN.0.downsample.0` and `.1`, no parameters) or "conv" (a 1×1 conv,
  /// stride 2, of the pre-activated input, named `layerN.0.downsample`; Distiller's
  /// preact_resnet*_cifar_conv_ds). Default "pad".
  TORCH_ARG(std::string, shortcut) = "pad";

 public:
  /// Each option as (JSON key, field, bounds); depth is not one (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{8, kMaxInputSize});
    f("shortcut", shortcut_);
  }
  void validate(const std::string& model) const;
};

/// preact_resnet18, preact_resnet34, preact_resnet50 (Distiller's pre-activation ImageNet
/// ResNets).
struct PreactResNetOptions {
  /// Layers: 18 or 34 (basic blocks) or 50 (bottlenecks). Fixed by the registry name, so it is
  /// neither a model arg nor a checkpoint key. Default 18.
  TORCH_ARG(int64_t, depth) = 18;
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 32 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;

 public:
  /// Each option as (JSON key, field, bounds); depth is not one (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
  }
  void validate(const std::string& model) const;
};

/// resnet18, resnet34, resnet50 (torchvision, v1.5 bottleneck).
struct ResNetOptions {
  /// Layers: 18 or 34 (basic blocks) or 50 (bottlenecks). Fixed by the registry name
  /// (resnet50 → 50), so it is neither a model arg nor a checkpoint key. Default 18.
  TORCH_ARG(int64_t, depth) = 18;
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 32 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;

 public:
  /// Each option as (JSON key, field, bounds); depth is not one (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
  }
  void validate(const std::string& model) const;
};

/// vgg16_cifar (Li et al. 2016: conv + BN, a 512→512→classes classifier; or Distiller's).
struct Vgg16CifarOptions {
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 32 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;
  /// "li": Li et al.'s (conv + BN, classifier fc 512→512, BN1d, ReLU, fc); "distiller":
  /// Distiller's vgg16_cifar (VGG-16 convs without BN, `classifier` one fc 512→classes).
  /// Default "li".
  TORCH_ARG(std::string, layout) = "li";

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
    f("layout", layout_);
  }
  void validate(const std::string& model) const;
};

/// vgg11, vgg13, vgg16, vgg19 and vgg11_bn … vgg19_bn (torchvision); vgg11_cifar …
/// vgg19_bn_cifar (Distiller's CIFAR VGGs: torchvision's features, one fc 512→classes).
struct VggOptions {
  /// Layers: 11, 13, 16 or 19 (torchvision's configurations A, B, D, E). Fixed by the registry
  /// name, so it is neither a model arg nor a checkpoint key. Default 16.
  TORCH_ARG(int64_t, depth) = 16;
  /// BatchNorm after every conv (the `_bn` models). Fixed by the registry name. Default false.
  TORCH_ARG(bool, batch_norm) = false;
  /// Distiller's CIFAR classifier (the `_cifar` models): features at 1x1 (32x32 inputs; others
  /// are averaged to it), then one fc 512→classes named `classifier`. Fixed by the registry name.
  /// Default false.
  TORCH_ARG(bool, cifar) = false;
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 32 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
  }
  void validate(const std::string& model) const;
};

/// alexnet_bn (Distiller's AlexNet with BatchNorm after every conv and fc layer).
struct AlexNetBnOptions {
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 67 … 4096. At 227 the features end at 6×6, the size
  /// fc 9216→4096 takes; other sides are averaged to 6×6. Default 227.
  TORCH_ARG(int64_t, input_size) = 227;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{67, kMaxInputSize});
  }
};

/// alexnet (torchvision).
struct AlexNetOptions {
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 63 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{63, kMaxInputSize});
  }
};

/// mobilenet, mobilenet_025, mobilenet_050, mobilenet_075 (Distiller's MobileNet v1).
struct MobileNetOptions {
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 32 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;
  /// Width multiplier: every layer has max(floor(c · multiplier), 8) channels for its base width c
  /// (32, 64, … 1024), above 0 and at most 4. Default 1.0 (0.25, 0.5, 0.75 for mobilenet_025 …).
  TORCH_ARG(double, channel_multiplier) = 1.0;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
    f("channel_multiplier", channel_multiplier_);
  }
  void validate(const std::string& model) const;
};

/// mobilenet_v2 (torchvision, width 1.0).
struct MobileNetV2Options {
  /// Output classes (logits), 1 … 100000. Default 1000.
  TORCH_ARG(int64_t, num_classes) = 1000;
  /// Side of the square input in pixels, 32 … 4096. Default 224.
  TORCH_ARG(int64_t, input_size) = 224;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
  }
};

/// densenet_cifar (DenseNet-BC, compression 0.5).
struct DenseNetCifarOptions {
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 8 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;
  /// Layers, 6n + 4 with n ≥ 1 (n bottleneck layers per dense block): 10, 16, … Default 40.
  TORCH_ARG(int64_t, depth) = 40;
  /// Growth rate k: channels each bottleneck layer adds, 1 … 256. Default 12.
  TORCH_ARG(int64_t, growth) = 12;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{8, kMaxInputSize});
    f("depth", depth_);
    f("growth", growth_, OptionBounds{1, 256});
  }
  void validate(const std::string& model) const;
};

/// inception_v3_cifar and inception_v3_cifar_earlyexit (torchvision's Inception-v3, stem for 32×32
/// inputs; docs/models.md).
struct InceptionV3CifarOptions {
  /// The cascade's four exits after layers 4, 8, 12 and 16 (inception_v3_cifar_earlyexit). Fixed
  /// by the registry name, so it is neither a model arg nor a checkpoint key. Default false.
  TORCH_ARG(bool, exits) = false;
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 24 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;

 public:
  /// Each option as (JSON key, field, bounds); exits is not one (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{24, kMaxInputSize});
  }
};

}  // namespace igb::models::classify
