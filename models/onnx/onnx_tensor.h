#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

namespace onnx {
class TensorProto;
}  // namespace onnx

namespace igb::models::onnx_import {

/// TensorProto::FLOAT, for code that includes no ONNX header.
inline constexpr int32_t kOnnxFloat = 1;

/// The name ONNX gives a TensorProto data type ("float", "int64", "uint16"); "type N" for a
/// number it does not define.
std::string onnx_type_name(int32_t data_type);

/// The LibTorch dtype of an ONNX data type; an InputError naming `what` for the types LibTorch has
/// no tensors of (string, uint16, uint32, uint64, complex) and for undefined ones.
c10::ScalarType torch_dtype(int32_t data_type, const std::string& what);

/// The ONNX data type of a LibTorch dtype (the inverse of torch_dtype).
int32_t onnx_data_type(c10::ScalarType dtype);

/// The largest dimension and element count an imported tensor may have (2^31 - 1 each): a
/// dimension of 2^40 in a file is an InputError, not an allocation.
inline constexpr int64_t kMaxDimension = (int64_t{1} << 31) - 1;

/// The tensor `t` holds, as a fresh LibTorch tensor of torch_dtype(t.data_type()): its raw_data
/// (little-endian) or the typed field its type uses (float_data, int32_data, int64_data,
/// double_data, uint64_data). External data must have been read into raw_data before
/// (OnnxFile does). An InputError naming `what` (the initializer, the Constant node) when the
/// data does not match the dims, a dimension is negative or too large, or the type has no
/// LibTorch dtype.
at::Tensor tensor_from_proto(const onnx::TensorProto& t, const std::string& what);

/// `tensor` as a TensorProto named `name`, its data in raw_data.
void tensor_to_proto(const at::Tensor& tensor, const std::string& name, onnx::TensorProto& out);

/// Reads a file holding one serialized TensorProto (the inputs and expected outputs of ONNX's
/// backend tests, `test_data_set_0/input_0.pb`).
at::Tensor read_tensor_file(const std::string& path);

}  // namespace igb::models::onnx_import
