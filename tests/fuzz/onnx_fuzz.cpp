// Fuzzes the ONNX importer's reading of a file: the protobuf, the model's structure, its
// initializers and the graph checks (undefined names, cycles, dimensions), then which operators it
// uses. InputError is the expected answer to a bad file; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "models/onnx/onnx_body.h"
#include "models/onnx/onnx_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    auto graph = igb::models::onnx_import::build_graph(
        igb::models::onnx_import::parse_onnx_model(bytes, "fuzz.onnx", ""));
    igb::models::onnx_import::unsupported_ops(graph);
  } catch (const igb::InputError&) {
  }
  return 0;
}
