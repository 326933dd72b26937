#include "core/logger.h"

#include <iostream>

#include "core/fs.h"

namespace igb {

void Logger::open_file(const std::filesystem::path& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_.is_open()) file_.close();
  file_.open(path, std::ios::app);
  if (!file_) throw std::runtime_error("cannot open log file " + path.string());
}

void Logger::info(const std::string& line) { write("INFO", line); }
void Logger::warn(const std::string& line) { write("WARN", line); }

void Logger::write(const std::string& level, const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string stamped = local_time_string("%Y-%m-%d %H:%M:%S") + " - " + level + " - " + line;
  if (file_.is_open()) {
    file_ << stamped << '\n';
    file_.flush();
  }
  if (!quiet_) {
    if (before_console_) before_console_();
    std::cerr << (level == "WARN" ? "warning: " : "") << line << std::endl;
  }
}

}  // namespace igb
