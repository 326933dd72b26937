#pragma once

#include <torch/nn/module.h>

#include "graph/summary_graph.h"
#include "tools/report.h"

namespace igb::tools {

/// The compute of one convolution, transposed convolution or linear layer.
struct LayerMacs {
  std::string name, type, attrs;
  graph::Shape ifm, ofm, weights;
  /// Parameters of the layer (weight and bias).
  int64_t params = 0;
  int64_t macs = 0;
};

/// MACs of a whole model for one input, by the convention of torchvision, Distiller and fvcore:
/// conv = Cout·Hout·Wout·(Cin/groups)·kh·kw, transposed conv = Cin·(Cout/groups)·kh·kw per input
/// pixel, linear = in·out per output row; bias, normalisation, activations, pooling and adds are
/// not counted. Computed for the graph's input as given (batch 1 by default).
struct MacsSummary {
  std::string model;
  graph::Shape input;
  int64_t total_macs = 0;
  /// Every parameter of the model (BatchNorm affine included), as torchvision counts.
  int64_t total_params = 0;
  std::vector<LayerMacs> layers;
};

/// Reads the layers off the summary graph of `model`.
MacsSummary compute_macs(const graph::SummaryGraph& graph, const torch::nn::Module& model);

/// Table `Name, Type, Attrs, IFM, IFM volume, OFM, OFM volume, Weights volume, MACs`, totals in
/// the footer; JSON {"model", "input", "total_macs", "total_params", "layers": [...]}.
Report macs_report(const MacsSummary& summary);

}  // namespace igb::tools
