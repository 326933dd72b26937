#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace onnx {
class ModelProto;
}  // namespace onnx

namespace igb::models::onnx_import {

/// The oldest and newest default-domain opsets igb imports (docs/onnx-import.md).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 18;

/// An ONNX model read from a file, with its external data in memory.
struct OnnxFile {
  /// The file's absolute path, which names the model in messages.
  std::string path;
  /// The model, every tensor's data inside it (raw_data).
  std::shared_ptr<onnx::ModelProto> model;
  /// The version of the default ("" or "ai.onnx") domain the model imports.
  int64_t opset = 0;
};

/// Reads the ONNX model in `path`. External data (tensors whose data_location is EXTERNAL) is read
/// from files inside the model's folder only. Refused with one InputError line naming the file:
/// a missing file, one that does not parse as an ONNX ModelProto (truncated, or not ONNX), one
/// without a graph or IR version, an opset outside [kMinOpset, kMaxOpset], external data missing,
/// outside the model's folder or shorter than it says, and (for opsets ONNX 1.12 knows, up to 17)
/// whatever ONNX's checker refuses.
OnnxFile read_onnx_file(const std::string& path);

/// The same for a model already in memory (`bytes`, named `name` in messages); external data is
/// looked for in `folder` (empty: none may be external).
OnnxFile parse_onnx_model(const std::string& bytes, const std::string& name,
                          const std::string& folder);

/// Runs ONNX's checker on `file`'s model where its schemas know the opset (up to 17); an
/// InputError naming the file with the checker's first line otherwise.
void check_onnx_model(const OnnxFile& file);

}  // namespace igb::models::onnx_import
