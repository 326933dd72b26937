#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/partition/transfer_size.h"

namespace igb::deploy {

/// A tensor as it crosses a link between stage workers (docs/partition.md, "bytes at each cut"):
/// its float32 values in `precision`, sent dense or, when that is smaller, in CSR over rows of
/// its last dimension. The payload is exactly the bytes the partitioner counts for the tensor
/// (dense_bytes / csr_bytes): values (little-endian float32, float16 or int8), for CSR the int32
/// column index of each value and the rows + 1 int32 row pointers, for int8 the float32 scale and
/// int32 zero point first.
struct EncodedTensor {
  std::vector<int64_t> shape;
  TransferPrecision precision = TransferPrecision::kFp32;
  bool sparse = false;
  /// A difference from the previous tensor of the same stream (DiffEncoder).
  bool difference = false;
  std::string payload;
};

/// Encodes a float32 tensor, choosing dense or CSR by the real byte counts (the smaller).
EncodedTensor encode_tensor(const at::Tensor& t, TransferPrecision precision);
/// The float32 tensor back. A payload that does not fit its shape, precision and layout
/// (truncated, a row pointer out of order, a column outside the row, a non-finite int8 scale) is
/// an InputError naming `what` and the fault; nothing reads past the payload.
at::Tensor decode_tensor(const EncodedTensor& e, const std::string& what);

/// Sends a stream of same-shaped tensors (one per frame) as differences: the first whole, each
/// later one as its difference from what the receiver holds (the previous decoded tensor, so
/// rounding in FP16 or INT8 does not accumulate), sparse when the difference is mostly zeros.
class DiffEncoder {
 public:
  explicit DiffEncoder(TransferPrecision precision) : precision_(precision) {}
  EncodedTensor encode(const at::Tensor& t);
  /// Forgets the previous tensor: the next one is sent whole (a new plan, a lost message).
  void reset() { previous_ = at::Tensor(); }

 private:
  TransferPrecision precision_;
  at::Tensor previous_;
};

/// The receiving end of a DiffEncoder: adds a difference to the tensor it holds.
class DiffDecoder {
 public:
  /// InputError when a difference arrives with no tensor held or of another shape.
  at::Tensor decode(const EncodedTensor& e, const std::string& what);
  void reset() { previous_ = at::Tensor(); }

 private:
  at::Tensor previous_;
};

}  // namespace igb::deploy
