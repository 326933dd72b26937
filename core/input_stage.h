#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>

namespace igb {

/// A model whose input can pass through one stage before its own layers, a registered child module
/// with a name of its own. A quantizer puts the fake quantization of the model input there
/// (Distiller's `inputs_quant`); the model runs whatever stage it holds without knowing what it is.
///
///   slot.set_input_stage("inputs_quant", q.ptr(), [q](const at::Tensor& x) { return q->forward(x);
///   });
class InputStage {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;
  virtual ~InputStage() = default;
  /// Registers `module` as the child `name` and runs `forward` on every input before the model's
  /// layers, replacing a stage set before.
  virtual void set_input_stage(const std::string& name, std::shared_ptr<torch::nn::Module> module,
                               Forward forward) = 0;
  /// The stage's module; null when none is set.
  virtual std::shared_ptr<torch::nn::Module> input_stage() const = 0;
};

}  // namespace igb
