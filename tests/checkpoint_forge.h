// Forges checkpoints for tests and fuzz seeds: a checkpoint's records edited and its
// igb_checksums record recomputed, as someone who wants a loader to trust a damaged file would.
#pragma once

#include <caffe2/serialize/inline_container.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/crc32c.h"

namespace igb::test {

/// Copies the checkpoint `in` to `out` with each record passed through `edit` (name, bytes; set
/// `keep` false to leave the record out) and igb_checksums written anew for what was kept.
inline void forge_checkpoint(
    const std::filesystem::path& in, const std::filesystem::path& out,
    const std::function<void(const std::string& name, std::string& bytes, bool& keep)>& edit) {
  caffe2::serialize::PyTorchStreamReader reader(in.string());
  std::ostringstream zip;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) -> size_t {
    zip.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    return size;
  });
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& name : reader.getAllRecords()) {
    if (name == "igb_checksums") continue;  // written anew below
    auto record = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(std::get<0>(record).get()), std::get<1>(record));
    bool keep = true;
    edit(name, bytes, keep);
    if (!keep) continue;
    sums[name] = crc32c(bytes.data(), bytes.size());
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  const std::string text = nlohmann::json{{"algorithm", "crc32c"}, {"records", sums}}.dump();
  writer.writeRecord("igb_checksums", text.data(), text.size());
  writer.writeEndOfFile();
  std::ofstream(out, std::ios::binary | std::ios::trunc) << zip.str();
}

/// The names of a checkpoint's records.
inline std::vector<std::string> checkpoint_records(const std::filesystem::path& path) {
  caffe2::serialize::PyTorchStreamReader reader(path.string());
  return reader.getAllRecords();
}

}  // namespace igb::test
