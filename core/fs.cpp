#include "core/fs.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace igb {

namespace fs = std::filesystem;

void write_atomically(const fs::path& path, const std::function<void(const fs::path& tmp)>& write) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  try {
    write(tmp);
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  write_atomically(path, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  });
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read file " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string local_time_string(const char* fmt) {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

}  // namespace igb
