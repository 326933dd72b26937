#include "models/onnx/onnx_tensor.h"

#include <ATen/Functions.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"

namespace igb::models::onnx_import {

namespace {

using onnx::TensorProto;

/// Element count of `dims`; an InputError naming `what` for a negative or too large dimension,
/// or dimensions whose product passes 2^31 (zeros left out: a tensor's strides multiply the
/// others even when it holds no element).
int64_t element_count(const std::vector<int64_t>& dims, const std::string& what) {
  int64_t n = 1;
  int64_t span = 1;
  for (int64_t d : dims) {
    if (d < 0 || d > kMaxDimension)
      throw InputError(what + ": dimension " + std::to_string(d) + " is out of range [0, 2^31)");
    if (d != 0 && span > kMaxDimension / d)
      throw InputError(what + ": " + std::to_string(dims.size()) +
                       "-D tensor has more than 2^31 elements");
    span *= std::max<int64_t>(d, 1);
    n *= d;
  }
  return n;
}

void check_count(int64_t have, int64_t want, const std::string& what, const char* field) {
  if (have != want)
    throw InputError(what + ": " + field + " holds " + std::to_string(have) + " values, its dims " +
                     std::to_string(want));
}

/// Copies a typed repeated field into a tensor of `dtype` (values converted one by one).
template <class Field>
at::Tensor from_field(const Field& field, const std::vector<int64_t>& dims, c10::ScalarType dtype,
                      int64_t n, const std::string& what, const char* name) {
  check_count(field.size(), n, what, name);
  using T = std::decay_t<decltype(*field.begin())>;
  const auto wide = std::is_floating_point_v<T> ? at::kDouble : at::kLong;
  auto out = at::empty({n}, at::TensorOptions().dtype(wide));
  if (wide == at::kDouble) {
    auto* p = out.template data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(field.Get(static_cast<int>(i)));
  } else {
    auto* p = out.template data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(field.Get(static_cast<int>(i)));
  }
  return out.to(dtype).reshape(dims);
}

/// FLOAT16 and BFLOAT16 in int32_data: the 16 bits of each value.
at::Tensor from_half_bits(const TensorProto& t, const std::vector<int64_t>& dims,
                          c10::ScalarType dtype, int64_t n, const std::string& what) {
  check_count(t.int32_data_size(), n, what, "int32_data");
  auto out = at::empty({n}, at::TensorOptions().dtype(at::kShort));
  auto* p = out.data_ptr<int16_t>();
  for (int64_t i = 0; i < n; ++i)
    p[i] = static_cast<int16_t>(static_cast<uint16_t>(t.int32_data(static_cast<int>(i))));
  return out.view(dtype).reshape(dims);
}

}  // namespace

std::string onnx_type_name(int32_t data_type) {
  static const char* const kNames[] = {"undefined",  "float",   "uint8",  "int8",   "uint16",
                                       "int16",      "int32",   "int64",  "string", "bool",
                                       "float16",    "double",  "uint32", "uint64", "complex64",
                                       "complex128", "bfloat16"};
  if (data_type >= 0 && data_type < static_cast<int32_t>(std::size(kNames)))
    return kNames[data_type];
  return "type " + std::to_string(data_type);
}

c10::ScalarType torch_dtype(int32_t data_type, const std::string& what) {
  switch (data_type) {
    case TensorProto::FLOAT:
      return at::kFloat;
    case TensorProto::UINT8:
      return at::kByte;
    case TensorProto::INT8:
      return at::kChar;
    case TensorProto::INT16:
      return at::kShort;
    case TensorProto::INT32:
      return at::kInt;
    case TensorProto::INT64:
      return at::kLong;
    case TensorProto::BOOL:
      return at::kBool;
    case TensorProto::FLOAT16:
      return at::kHalf;
    case TensorProto::DOUBLE:
      return at::kDouble;
    case TensorProto::BFLOAT16:
      return at::kBFloat16;
    default:
      break;
  }
  throw InputError(what + ": element type " + onnx_type_name(data_type) +
                   " has no LibTorch tensor (igb imports float, float16, bfloat16, double, "
                   "int8/16/32/64, uint8 and bool tensors)");
}

int32_t onnx_data_type(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return TensorProto::FLOAT;
    case at::kByte:
      return TensorProto::UINT8;
    case at::kChar:
      return TensorProto::INT8;
    case at::kShort:
      return TensorProto::INT16;
    case at::kInt:
      return TensorProto::INT32;
    case at::kLong:
      return TensorProto::INT64;
    case at::kBool:
      return TensorProto::BOOL;
    case at::kHalf:
      return TensorProto::FLOAT16;
    case at::kDouble:
      return TensorProto::DOUBLE;
    case at::kBFloat16:
      return TensorProto::BFLOAT16;
    default:
      return TensorProto::UNDEFINED;
  }
}

at::Tensor tensor_from_proto(const TensorProto& t, const std::string& what) {
  if (t.data_location() == TensorProto::EXTERNAL && !t.has_raw_data())
    throw InputError(what + ": its external data was not read");
  if (t.has_segment()) throw InputError(what + ": segmented tensors are not supported");
  const auto dtype = torch_dtype(t.data_type(), what);
  const std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  const int64_t n = element_count(dims, what);
  if (t.has_raw_data()) {
    const auto& raw = t.raw_data();
    const int64_t item = static_cast<int64_t>(c10::elementSize(dtype));
    if (static_cast<int64_t>(raw.size()) != n * item)
      throw InputError(what + ": raw_data holds " + std::to_string(raw.size()) + " bytes, its " +
                       std::to_string(n) + " " + onnx_type_name(t.data_type()) + " values " +
                       std::to_string(n * item));
    auto out = at::empty(dims, at::TensorOptions().dtype(dtype));
    if (n > 0) std::memcpy(out.data_ptr(), raw.data(), raw.size());
    return out;
  }
  switch (t.data_type()) {
    case TensorProto::FLOAT:
      return from_field(t.float_data(), dims, dtype, n, what, "float_data");
    case TensorProto::DOUBLE:
      return from_field(t.double_data(), dims, dtype, n, what, "double_data");
    case TensorProto::INT64:
      return from_field(t.int64_data(), dims, dtype, n, what, "int64_data");
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      return from_half_bits(t, dims, dtype, n, what);
    default:
      return from_field(t.int32_data(), dims, dtype, n, what, "int32_data");
  }
}

void tensor_to_proto(const at::Tensor& tensor, const std::string& name, TensorProto& out) {
  const auto t = tensor.contiguous();
  out.set_name(name);
  out.set_data_type(onnx_data_type(t.scalar_type()));
  out.clear_dims();
  for (int64_t d : t.sizes()) out.add_dims(d);
  out.set_raw_data(std::string(static_cast<const char*>(t.data_ptr()), t.nbytes()));
}

at::Tensor read_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open");
  TensorProto t;
  if (!t.ParseFromIstream(&in)) throw InputError(path + ": not a serialized ONNX TensorProto");
  return tensor_from_proto(t, path);
}

}  // namespace igb::models::onnx_import
