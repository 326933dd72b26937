#pragma once

#include <ATen/core/ivalue.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>
#include <vector>

#include "core/thinning_recipe.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit

namespace igb::models {

struct ScriptContext;

/// Loads a TorchScript archive (`torch.jit.script(m).save(f)` or `torch.jit.trace(m, x).save(f)`);
/// a file that is missing or is not a TorchScript archive is an InputError naming it.
torch::jit::Module load_torchscript(const std::string& file);

/// A TorchScript module rebuilt as native modules, so that every tool of igb sees an imported
/// model as it sees a zoo model (docs/byo-model.md).
///
/// build() mirrors the module hierarchy into `owner`: each submodule of a type igb knows
/// (torch.nn's Conv2d, ConvTranspose2d, Linear, BatchNorm1d/2d, ReLU, ReLU6, LeakyReLU, PReLU,
/// Tanh, Sigmoid) becomes the matching torch::nn module or igb::Activation, with the
/// hyperparameters its TorchScript forward passes to its operator and its tensors; every other
/// module becomes a block that registers its parameters, buffers and children under the same
/// names and runs its own TorchScript forward op by op. So parameter names are PyTorch's
/// (`features.0.weight`), pruning and thinning change the native modules, a quantizer can rewire
/// the activations, and a trace of the rebuilt model shows the same operators as the file.
///
/// run() interprets the root forward: calls of a submodule's forward go to the native module (a
/// block interprets its own), prim::If and prim::Loop run their blocks, and every other node runs
/// through TorchScript's operator registry, so the trace of a summary graph records them.
class ScriptBody {
 public:
  ScriptBody();
  ~ScriptBody();
  ScriptBody(ScriptBody&&) noexcept;
  ScriptBody& operator=(ScriptBody&&) noexcept;

  /// Mirrors `module` into `owner` (which must have no parameters or children yet). `file`
  /// names the model in messages. An unsupported construct (an attribute assignment, a module
  /// passed as a value, an operator without an implementation) is an InputError naming the module
  /// and the op.
  void build(const torch::jit::Module& module, torch::nn::Module& owner, const std::string& file);

  /// The root forward on `inputs`, with `owner` the module build() filled.
  c10::IValue run(torch::nn::Module& owner, std::vector<c10::IValue> inputs) const;

 private:
  std::shared_ptr<ScriptContext> ctx_;
};

/// A TorchScript submodule igb has no native module for: it holds the submodule's tensors and
/// children under their names and runs the submodule's forward graph (ScriptBody). Its code reads
/// its tensors as they are, so thinning slices a weight it passes to a functional op
/// (`F.conv2d(x, self.weight)`) with nothing else to change.
class ScriptedBlockImpl : public torch::nn::Module, public ShapedByTensors {
 public:
  explicit ScriptedBlockImpl(std::shared_ptr<ScriptContext> ctx);
  /// The forward of the TorchScript submodule this block mirrors.
  c10::IValue forward(std::vector<c10::IValue> inputs);

 private:
  std::shared_ptr<ScriptContext> ctx_;
};

}  // namespace igb::models
