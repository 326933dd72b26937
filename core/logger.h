#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

namespace igb {

/// Writes timestamped lines to the console (stderr) and, once a run directory exists, to its
/// `train.log`. Passed explicitly through the run context; there is no global logger.
///
/// Each line reaches the file whole or not at all (append_file_bytes). The first line the system
/// refuses (a full disk, a file-size limit) throws InputError "cannot write FILE: REASON" from the
/// call that logged it, and the file is written no more: the run stops on that one line rather
/// than going on with a log that silently ends.
class Logger {
 public:
  Logger() = default;

  /// Starts appending every line to `path` as well as to the console (InputError naming the file
  /// and the reason when it cannot be written).
  void open_file(const std::filesystem::path& path);

  void info(const std::string& line);
  void warn(const std::string& line);

  /// Suppresses console output (the file still gets every line).
  void set_quiet(bool quiet) { quiet_ = quiet; }

  /// Called before a line is printed so a live status line can be cleared first.
  void set_console_hook(std::function<void()> hook) { before_console_ = std::move(hook); }

 private:
  void write(const std::string& level, const std::string& line);

  std::mutex mutex_;
  std::filesystem::path file_;  // empty: console only
  bool quiet_ = false;
  std::function<void()> before_console_;
};

}  // namespace igb
