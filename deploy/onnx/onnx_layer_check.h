#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "deploy/onnx/onnx_export.h"
#include "deploy/onnx/onnx_runtime.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// One fake quantization op of an INT8 Q/DQ export: our value against onnxruntime's at the same
/// point, both computed from onnxruntime's values of the quantized layers before it.
struct OnnxLayerAgreement {
  std::string layer, onnx_name;
  /// One step of the layer's grid.
  double scale = 0;
  int64_t elements = 0;
  /// Share of the elements on the same grid value (a gap under half a step), within one step,
  /// and the largest gap in steps.
  double exact = 0, within_one_step = 0, max_steps = 0;
};

/// What check_qdq_layers measured, layers in trace order.
struct OnnxLayerCheck {
  std::vector<OnnxLayerAgreement> layers;
  /// The model's first output computed from onnxruntime's quantized values: the largest
  /// |ours − onnxruntime| and the largest |ours|.
  double output_max_abs = 0, output_max = 0;
  /// The worst layer's share within one step (1 when there is no layer).
  double worst_within_one_step() const;
};

/// Compares an INT8 Q/DQ export (`report`, as export_onnx wrote it from `model` traced as
/// `graph`) with the model's own fake-quantized forward pass one quantized layer at a time, on
/// input `x`: onnxruntime runs a copy of the file that also outputs every fake quantization op's
/// DequantizeLinear value; the model's trace is then replayed with each of those values replaced
/// by onnxruntime's once it has been compared, so a last-bit difference in one layer (a value on
/// a rounding boundary that the two runtimes round differently) is counted there and is not
/// carried into every later layer. The copy and onnxruntime's files go into `work_dir`. The model
/// runs in eval mode without gradients. InputError when the report has no quantized value (not
/// an INT8 export of a model with fake quantization) or onnxruntime fails.
OnnxLayerCheck check_qdq_layers(torch::nn::Module& model, const SummaryGraph& graph,
                                const OnnxExportReport& report, const at::Tensor& x,
                                const std::filesystem::path& work_dir,
                                const OnnxRuntimeOptions& options = {});

}  // namespace igb::deploy
