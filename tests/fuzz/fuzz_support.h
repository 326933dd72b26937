// Shared helpers of the libFuzzer targets (scripts/fuzz.sh).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace igb::fuzz {

/// A file of this process in the temporary folder, rewritten with each input: the readers under
/// test take paths. `name` keeps its extension ("image.png").
inline std::filesystem::path write_input(const std::string& name, const uint8_t* data,
                                         size_t size) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("igb_fuzz_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace igb::fuzz
