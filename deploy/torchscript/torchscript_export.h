#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace igb::deploy {

/// What export_torchscript wrote.
struct TorchScriptExportReport {
  std::filesystem::path path;
  /// Parameters and buffers in the file, under the model's names.
  int64_t parameters = 0;
  int64_t buffers = 0;
  /// Operators of the written forward.
  int64_t ops = 0;
};

/// Writes `model` as a TorchScript archive that PyTorch's torch.jit.load (and LibTorch's, and
/// igb's --model torchscript:PATH) reads: a module tree with the model's own module names, every
/// parameter and buffer at its name (`layer1.0.conv1.weight`, a thinned model's thinned shapes,
/// a quantized model's float copies and scales), and a forward traced from `forward` on zeros of
/// `input` in evaluation mode, reading them from the tree. The file computes the model's output
/// in evaluation mode (batch norms on their running statistics, fake quantizations on their
/// stored ranges) for inputs of `input`'s rank; shapes the trace fixed (a flatten's size) stay.
/// Written atomically; a model the tracer cannot follow is an InputError naming the reason.
TorchScriptExportReport export_torchscript(
    torch::nn::Module& model, const std::vector<int64_t>& input,
    const std::function<at::Tensor(const at::Tensor&)>& forward, const std::filesystem::path& out);

}  // namespace igb::deploy
