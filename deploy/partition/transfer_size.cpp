#include "deploy/partition/transfer_size.h"

#include <algorithm>

#include "core/error.h"

namespace igb::deploy {

std::string transfer_precision_name(TransferPrecision p) {
  switch (p) {
    case TransferPrecision::kFp16:
      return "fp16";
    case TransferPrecision::kInt8:
      return "int8";
    case TransferPrecision::kFp32:
      break;
  }
  return "fp32";
}

TransferPrecision parse_transfer_precision(const std::string& text) {
  if (text == "fp32") return TransferPrecision::kFp32;
  if (text == "fp16") return TransferPrecision::kFp16;
  if (text == "int8") return TransferPrecision::kInt8;
  throw InputError("unknown transfer precision '" + text + "'; valid ones are fp32, fp16, int8");
}

namespace {

double element_bytes(TransferPrecision p) {
  return p == TransferPrecision::kFp32 ? 4 : p == TransferPrecision::kFp16 ? 2 : 1;
}
double header_bytes(TransferPrecision p) { return p == TransferPrecision::kInt8 ? 8 : 0; }

}  // namespace

double dense_bytes(const graph::Shape& shape, TransferPrecision p) {
  return static_cast<double>(graph::volume(shape)) * element_bytes(p) + header_bytes(p);
}

double csr_bytes(const graph::Shape& shape, double nonzeros, TransferPrecision p) {
  const double cols = shape.empty() ? 1.0 : static_cast<double>(std::max<int64_t>(1, shape.back()));
  const double rows = static_cast<double>(graph::volume(shape)) / cols;
  return nonzeros * (element_bytes(p) + 4) + (rows + 1) * 4 + header_bytes(p);
}

double encoded_bytes(const graph::Shape& shape, double nonzeros, TransferPrecision p) {
  return std::min(dense_bytes(shape, p), csr_bytes(shape, nonzeros, p));
}

}  // namespace igb::deploy
