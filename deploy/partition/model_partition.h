#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "deploy/partition/devices_file.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/partition_problem.h"
#include "tools/graph/summary_graph.h"

namespace igb::deploy {

/// How tensors cross a link.
enum class TransferPrecision {
  kFp32,
  kFp16,
  /// One byte a value plus the tensor's scale and zero point (8 bytes); the scale comes from the
  /// model's quantizer where it has one for the tensor.
  kInt8,
};
std::string transfer_precision_name(TransferPrecision p);
/// "fp32", "fp16", "int8"; InputError naming the valid ones otherwise.
TransferPrecision parse_transfer_precision(const std::string& text);

/// Bytes of a tensor of `shape` sent dense.
double dense_bytes(const tools::Shape& shape, TransferPrecision p);
/// Bytes of the same tensor in CSR, viewed as a matrix of numel / last-dim rows: every non-zero's
/// value and int32 column index, and rows + 1 int32 row pointers (plus int8's 8 bytes).
double csr_bytes(const tools::Shape& shape, double nonzeros, TransferPrecision p);
/// What is sent: the smaller of dense and CSR (docs/partition.md states the break-even).
double encoded_bytes(const tools::Shape& shape, double nonzeros, TransferPrecision p);

/// Zero ratios of one tensor of the graph measured on real frames: of the tensor itself, and of
/// its difference from the previous frame's.
struct ValueTraffic {
  double zero_ratio = 0;
  double diff_zero_ratio = 0;
};

/// Runs the traced graph on `frames` (each one input of the graph's shape) and measures every
/// value's zero ratio and, between consecutive frames, its difference's (keyed by value id).
std::map<int, ValueTraffic> measure_traffic(const tools::SummaryGraph& graph,
                                            const std::vector<at::Tensor>& frames);

/// What partition_problem builds a problem from.
struct ModelPartitionInputs {
  /// One cost file per device, in chain order (each device's speed factor applied on top).
  std::vector<LayerCosts> costs;
  TransferPrecision precision = TransferPrecision::kFp32;
  /// Measured zero ratios: with them a tensor is sent sparse where that is smaller.
  const std::map<int, ValueTraffic>* traffic = nullptr;
  /// Size the tensors of a later frame: differences from the previous frame (needs traffic).
  bool differences = false;
};

/// The planner's problem for `graph` on the chain of `devices`: a node per op (its cost on each
/// device = the device's cost file / its speed), a value per tensor crossing between ops (the
/// frame and every op output), with bytes as sent. Throws InputError when a cost file does not
/// match the graph.
PartitionProblem partition_problem(const tools::SummaryGraph& graph, const DevicesFile& devices,
                                   const ModelPartitionInputs& inputs);

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
std::vector<CutTraffic> cut_traffic(const tools::SummaryGraph& graph, TransferPrecision precision,
                                    const std::map<int, ValueTraffic>* traffic);

}  // namespace igb::deploy
