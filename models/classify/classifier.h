#pragma once

#include "models/model.h"

namespace igb::models::classify {

/// Base of the classification models: an image batch [N, C, H, W] in, logits [N, classes] out.
class ClassifierImpl : public ModelImpl {
 public:
  ClassifierImpl(int64_t num_classes, std::vector<int64_t> input_shape)
      : num_classes_(num_classes), input_shape_(std::move(input_shape)) {}

  int64_t num_classes() const { return num_classes_; }
  std::vector<int64_t> input_shape() const override { return input_shape_; }
  /// num_classes and input_size; models with more options extend it.
  nlohmann::json options_json() const override {
    return {{"num_classes", num_classes_}, {"input_size", input_shape_[2]}};
  }

 protected:
  int64_t num_classes_;
  std::vector<int64_t> input_shape_;
};

/// Reads `num_classes` (default `classes`) and, for models that accept any size, `input_size`
/// (default `size`, the side of the square input), with channels `channels`.
struct ClassifierOptions {
  int64_t num_classes;
  int64_t input_size;
  std::vector<int64_t> shape(int64_t channels) const { return {1, channels, input_size, input_size}; }
};
ClassifierOptions read_classifier_options(OptionReader& r, int64_t classes, int64_t size,
                                          int64_t min_size);

/// Adds every classification model to `registry`.
void register_classify_models(Registry<ModelSpec>& registry);

// Factories, one file per architecture family.
Model make_simplenet_cifar(const nlohmann::json& options);
Model make_lenet5(const nlohmann::json& options);
Model make_resnet_cifar(int64_t depth, const nlohmann::json& options);
Model make_vgg16_cifar(const nlohmann::json& options);
Model make_resnet(int64_t depth, const nlohmann::json& options);
Model make_vgg16(const nlohmann::json& options);
Model make_alexnet(const nlohmann::json& options);
Model make_mobilenet_v2(const nlohmann::json& options);
Model make_densenet_cifar(const nlohmann::json& options);

}  // namespace igb::models::classify
