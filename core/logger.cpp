#include "core/logger.h"

#include <iostream>

#include "core/error.h"
#include "core/fs.h"

namespace igb {

void Logger::open_file(const std::filesystem::path& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  file_.clear();
  append_file_bytes(path, "");  // created when absent, or the one line saying why it cannot be
  file_ = path;
}

void Logger::info(const std::string& line) { write("INFO", line); }
void Logger::warn(const std::string& line) { write("WARN", line); }

void Logger::write(const std::string& level, const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string stamped = local_time_string("%Y-%m-%d %H:%M:%S") + " - " + level + " - " + line;
  if (!file_.empty()) {
    try {
      append_file_bytes(file_, stamped + '\n');
    } catch (const InputError&) {
      file_.clear();  // written no more; the refusal is the run's one error line
      throw;
    }
  }
  if (!quiet_) {
    if (before_console_) before_console_();
    std::cerr << (level == "WARN" ? "warning: " : "") << line << std::endl;
  }
}

}  // namespace igb
