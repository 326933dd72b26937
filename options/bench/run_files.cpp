#include "options/bench/run_files.h"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "options/bench/bench_report.h"

namespace igb::options {

namespace fs = std::filesystem;
using nlohmann::json;

bool training_complete(const fs::path& dir) {
  const json summary = read_json_or_null(dir / "summary.json");
  if (!summary.is_object() || !summary.contains("epochs")) return false;
  std::ifstream csv(dir / "metrics.csv");
  std::string line;
  int64_t rows = -1;  // the header
  while (std::getline(csv, line))
    if (!line.empty()) ++rows;
  return rows >= summary.value("epochs", int64_t{1} << 40);
}

std::string error_line(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last, error;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    last = line;
    if (line.find("error:") != std::string::npos) error = line;
  }
  return error.empty() ? last : error;
}

std::optional<std::pair<int64_t, int64_t>> last_epoch(const fs::path& log) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  if (!in) return std::nullopt;
  const std::streamoff size = in.tellg();
  const std::streamoff from = std::max<std::streamoff>(0, size - 8192);
  in.seekg(from);
  std::string tail(static_cast<size_t>(size - from), '\0');
  in.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  const size_t at = tail.rfind("==> epoch ");
  if (at == std::string::npos) return std::nullopt;
  long a = 0, b = 0;
  if (std::sscanf(tail.c_str() + at, "==> epoch %ld/%ld", &a, &b) != 2) return std::nullopt;
  return std::make_pair(static_cast<int64_t>(a) + 1, static_cast<int64_t>(b) + 1);
}

}  // namespace igb::options
