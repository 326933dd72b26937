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

/// resnet20_cifar … resnet110_cifar (He et al. 2016, zero-padded identity shortcuts).
struct ResNetCifarOptions {
  /// Layers, 6n + 2 (n basic blocks per stage). Fixed by the registry name (resnet56_cifar → 56),
  /// so it is neither a model arg nor a checkpoint key. Default 20.
  TORCH_ARG(int64_t, depth) = 20;
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 8 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;

 public:
  /// Each option as (JSON key, field, bounds); depth is not one (see above).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{8, kMaxInputSize});
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

/// vgg16_cifar (Li et al. 2016: conv + BN, a 512→512→classes classifier).
struct Vgg16CifarOptions {
  /// Output classes (logits), 1 … 100000. Default 10.
  TORCH_ARG(int64_t, num_classes) = 10;
  /// Side of the square input in pixels, 32 … 4096. Default 32.
  TORCH_ARG(int64_t, input_size) = 32;

 public:
  /// Each option as (JSON key, field, bounds).
  template <class F>
  void visit(F&& f) {
    f("num_classes", num_classes_, kNumClassesBounds);
    f("input_size", input_size_, OptionBounds{32, kMaxInputSize});
  }
};

/// vgg16 (torchvision, no BN).
struct Vgg16Options {
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

}  // namespace igb::models::classify
