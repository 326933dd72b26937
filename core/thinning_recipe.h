#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace igb {

/// A thinning recipe is what one thinning did to a model, as JSON, so a checkpoint of a thinned
/// model can rebuild it: build the dense model from the registry, replay its recipes in order,
/// then load the weights.
///
///   {"kind": "filters" | "channels",
///    "tensors": [{"name": "layer1.0.conv1.weight", "dim": 0, "size": 16, "keep": [0, 2, ...]},
///    ...], "modules": [{"name": "layer1.0.conv1", "set": {"out_channels": 10}}, ...]}
///
/// `size` is the length of `dim` before slicing; replaying onto a model of another shape is an
/// InputError naming the tensor.
/// `before_slice`, when given, is called for each tensor entry just before that tensor is sliced
/// (thinning during training slices optimizer state and masks alike).
using SliceHook = std::function<void(const std::string& name, const at::Tensor& t, int64_t dim,
                                     const std::vector<int64_t>& keep)>;
void apply_thinning_recipe(torch::nn::Module& model, const nlohmann::json& recipe,
                           const std::string& where, const SliceHook& before_slice = {});

/// Keeps the entries `keep` of dimension `dim` of `t` in place: the same TensorImpl (so optimizer
/// state stays attached) now holds the smaller tensor; a defined gradient is sliced alike.
void slice_in_place(at::Tensor& t, int64_t dim, const std::vector<int64_t>& keep);

/// A module whose forward takes its channel counts from the shapes of its tensors, as an imported
/// TorchScript module that runs its own code does (models/torchscript/script_body.h): thinning
/// slices its tensors and has no option of it to set.
class ShapedByTensors {
 public:
  virtual ~ShapedByTensors() = default;
};

/// Sets one option of a module thinning changes (conv in/out channels and groups, linear in/out
/// features, norm num_features, PReLU num_parameters, channel pad before/after); nothing for a
/// ShapedByTensors module.
void set_module_option(torch::nn::Module& module, const std::string& name,
                       const std::string& option, int64_t value);

}  // namespace igb
