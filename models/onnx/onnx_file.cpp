#include "models/onnx/onnx_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"

namespace igb::models::onnx_import {

namespace fs = std::filesystem;

namespace {

/// The newest opset whose schemas Debian's ONNX 1.12 holds: its checker judges models up to it.
constexpr int64_t kCheckerOpset = 17;

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

/// The value of `key` in a tensor's external_data entries ("" when absent).
std::string external_entry(const onnx::TensorProto& t, const std::string& key) {
  for (const auto& e : t.external_data())
    if (e.key() == key) return e.value();
  return "";
}

int64_t parse_size(const std::string& text, const std::string& what) {
  if (text.empty()) return -1;
  try {
    size_t pos = 0;
    const long long v = std::stoll(text, &pos);
    if (pos == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError(what + " is '" + text + "', not a byte count");
}

/// Reads the external data of `t` (named `what`) from `folder` into raw_data.
void read_external(onnx::TensorProto& t, const std::string& what, const std::string& folder) {
  const std::string location = external_entry(t, "location");
  const std::string tensor = what + " '" + t.name() + "'";
  if (location.empty()) throw InputError(tensor + ": external data without a location");
  if (folder.empty())
    throw InputError(tensor + ": external data '" + location + "' but the model has no folder");
  const fs::path rel(location);
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(folder, ec);
  const fs::path full = fs::weakly_canonical(base / rel, ec);
  const auto inside = [&] {
    if (rel.is_absolute() || ec) return false;
    auto b = base.begin();
    auto f = full.begin();
    for (; b != base.end(); ++b, ++f)
      if (f == full.end() || *f != *b) return false;
    return f != full.end();
  }();
  if (!inside)
    throw InputError(tensor + ": external data file '" + location +
                     "' lies outside the model's folder " + base.string() +
                     " (igb reads external data from the model's folder only)");
  if (!fs::is_regular_file(full, ec))
    throw InputError(tensor + ": external data file " + full.string() + " is missing");
  const int64_t size = static_cast<int64_t>(fs::file_size(full, ec));
  int64_t offset = parse_size(external_entry(t, "offset"), tensor + ": offset");
  int64_t length = parse_size(external_entry(t, "length"), tensor + ": length");
  if (offset < 0) offset = 0;
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset)
    throw InputError(tensor + ": external data file " + full.string() + " holds " +
                     std::to_string(size) + " bytes, the tensor asks for " +
                     std::to_string(length) + " from byte " + std::to_string(offset));
  std::ifstream in(full, std::ios::binary);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  if (!in.read(bytes.data(), length))
    throw InputError(tensor + ": cannot read its external data from " + full.string());
  t.set_raw_data(std::move(bytes));
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::DEFAULT);
}

void read_external_graph(onnx::GraphProto& g, const std::string& folder) {
  for (auto& t : *g.mutable_initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) read_external(t, "initializer", folder);
  for (auto& node : *g.mutable_node())
    for (auto& a : *node.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == onnx::TensorProto::EXTERNAL)
        read_external(*a.mutable_t(), "node '" + node.name() + "' attribute", folder);
      if (a.has_g()) read_external_graph(*a.mutable_g(), folder);
    }
}

int64_t default_opset(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      if (o.version() < kMinOpset || o.version() > kMaxOpset)
        throw InputError(name + ": opset " + std::to_string(o.version()) + "; igb imports opsets " +
                         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
      return o.version();
    }
  throw InputError(name + ": imports no version of the default ONNX operator set");
}

}  // namespace

OnnxFile parse_onnx_model(const std::string& bytes, const std::string& name,
                          const std::string& folder) {
  OnnxFile f;
  f.path = name;
  f.model = std::make_shared<onnx::ModelProto>();
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(std::numeric_limits<int>::max());
  if (!f.model->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    throw InputError(name + ": not an ONNX model, or a truncated one (its " +
                     std::to_string(bytes.size()) + " bytes do not parse as an ONNX ModelProto)");
  if (f.model->ir_version() <= 0 || !f.model->has_graph() || f.model->opset_import_size() == 0)
    throw InputError(name + ": not an ONNX model (no " +
                     std::string(f.model->ir_version() <= 0 ? "IR version"
                                 : !f.model->has_graph()    ? "graph"
                                                            : "opset import") +
                     ")");
  f.opset = default_opset(*f.model, name);
  read_external_graph(*f.model->mutable_graph(), folder);
  return f;
}

OnnxFile read_onnx_file(const std::string& path) {
  const std::string abs = fs::absolute(path).lexically_normal().string();
  std::error_code ec;
  if (!fs::exists(abs, ec)) throw InputError("ONNX model " + abs + ": no such file");
  if (fs::is_directory(abs, ec)) throw InputError("ONNX model " + abs + ": is a folder");
  const auto size = fs::file_size(abs, ec);
  if (ec || size > static_cast<uintmax_t>(std::numeric_limits<int>::max()))
    throw InputError("ONNX model " + abs +
                     ": over 2 GB in one file (save the weights as external data)");
  return parse_onnx_model(read_text_file(abs), abs, fs::path(abs).parent_path().string());
}

void check_onnx_model(const OnnxFile& file) {
  if (file.opset > kCheckerOpset) return;
  try {
    onnx::checker::check_model(*file.model);
  } catch (const std::exception& e) {
    throw InputError(file.path +
                     ": not a valid ONNX model (ONNX's checker: " + first_line(e.what()) + ")");
  }
}

}  // namespace igb::models::onnx_import
