#pragma once

#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace igb::models::onnx_import {

/// `name` made a legal module or parameter name: every character but letters, digits and '_'
/// becomes '_' (dots too when `keep_dots` is false), and a name that would be empty is "_".
std::string legal_name(const std::string& name, bool keep_dots);

/// The module path of a node named by PyTorch's exporter after its module scopes
/// ("/layer1/layer1.0/down/down.0/Conv" -> "layer1.0.down.0": a segment "<parent>.<child>" names
/// the child of the previous segment); "" for other names.
std::string scope_path(const std::string& node_name);

/// The module path of a layer whose weight is `initializer`: the weight's name without `suffix`
/// ("conv1.weight" -> "conv1"); for a name the exporter made up ("onnx::Conv_193", "123"), the
/// node's module scope when it has one ("/layer1/layer1.0/conv1/Conv" -> "layer1.0.conv1"), else
/// the whole name.
std::string path_of(const std::string& initializer, const std::string& suffix,
                    const std::string& node_name);

/// Registers modules and buffers in a model under dotted names made legal, making the scopes
/// between ("layer1", "layer1.0") as modules that only hold others.
class Namer {
 public:
  explicit Namer(torch::nn::Module& owner) : owner_(owner) {}

  /// Registers `m` at `want` (dotted) and returns the path it got: `want` made legal, or a flat
  /// name where a scope on the way is a layer already, with "_2", "_3", ... where it is taken.
  /// The module is put in evaluation mode while the body is built (a batch norm must not learn
  /// statistics from the sample input); the model's owner sets the mode after.
  std::string add_module(const std::string& want, std::shared_ptr<torch::nn::Module> m);

  /// Registers `t` as a buffer of the owner, its name made legal and flat; returns the name.
  std::string add_buffer(const std::string& want, const at::Tensor& t);

 private:
  std::string add_flat(const std::string& name, std::shared_ptr<torch::nn::Module> m);

  torch::nn::Module& owner_;
};

}  // namespace igb::models::onnx_import
