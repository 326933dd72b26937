// What crosses the cuts of a model: every tensor's zeros measured on real frames, and the bytes
// each cut of the topological order sends.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "deploy/partition/transfer_size.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

/// Zero ratios of one tensor of the graph measured on real frames: of the tensor itself, and of
/// its difference from the previous frame's.
struct ValueTraffic {
  double zero_ratio = 0;
  double diff_zero_ratio = 0;
};

/// Runs the traced graph on `frames` (each one input of the graph's shape) and measures every
/// value's zero ratio and, between consecutive frames, its difference's (keyed by value id).
std::map<int, ValueTraffic> measure_traffic(const graph::SummaryGraph& graph,
                                            const std::vector<at::Tensor>& frames);

/// One candidate cut of the topological order: ops up to `after` on one side, the rest on the
/// other, and what crosses.
struct CutTraffic {
  /// The last op before the cut ("" for the cut before the first op).
  std::string after;
  /// The tensors that cross (several for a residual block's skip or an inception block's
  /// branches), named as the ONNX export names them.
  std::vector<std::string> tensors;
  double fp32_bytes = 0, fp16_bytes = 0, int8_bytes = 0;
  /// With measured traffic: the crossing tensors' share of zeros (by elements) and the bytes sent
  /// in `precision` for a whole tensor and for a frame difference (the smaller of dense and CSR).
  double zero_ratio = 0, diff_zero_ratio = 0;
  double sent_bytes = 0, diff_sent_bytes = 0;
};

/// Every cut of the topological order (before each op and after the last).
std::vector<CutTraffic> cut_traffic(const graph::SummaryGraph& graph, TransferPrecision precision,
                                    const std::map<int, ValueTraffic>* traffic);

}  // namespace igb::deploy
