// How tensors cross a link of a chain: their precision and their size dense or in CSR.
#pragma once

#include <string>

#include "graph/summary_graph.h"

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
double dense_bytes(const graph::Shape& shape, TransferPrecision p);
/// Bytes of the same tensor in CSR, viewed as a matrix of numel / last-dim rows: every non-zero's
/// value and int32 column index, and rows + 1 int32 row pointers (plus int8's 8 bytes).
double csr_bytes(const graph::Shape& shape, double nonzeros, TransferPrecision p);
/// What is sent: the smaller of dense and CSR (docs/partition.md states the break-even).
double encoded_bytes(const graph::Shape& shape, double nonzeros, TransferPrecision p);

}  // namespace igb::deploy
