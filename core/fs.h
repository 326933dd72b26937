#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace igb {

/// Writes `path` atomically: `write` fills a temporary file beside it (`<path>.tmp<pid>`), which is
/// flushed to disk (fsync) and then replaces `path` by rename; the directory is synced after the
/// rename so the new name survives a crash. A failure (or exception in `write`) leaves any existing
/// `path` untouched and removes the temporary file. While `write` runs the temporary file is
/// registered as pending, so SIGINT/SIGTERM remove it too (see remove_pending_temporaries).
void write_atomically(const std::filesystem::path& path,
                      const std::function<void(const std::filesystem::path& tmp)>& write);

/// Atomically writes `text` to `path`.
void write_text_atomically(const std::filesystem::path& path, const std::string& text);

/// Writes `bytes` to the file `file` (created or truncated), for write_atomically's callbacks:
/// InputError "cannot write SHOWN: REASON" in one line when the system refuses (a full disk: "No
/// space left on device", a file-size limit: "File too large"), `shown` being the file the user
/// knows (the final path, not the temporary one).
void write_file_bytes(const std::filesystem::path& file, const std::string& bytes,
                      const std::filesystem::path& shown);
/// Appends `bytes` to `file` (created when absent) whole or not at all: when the system refuses
/// part way, the file is cut back to its old length and InputError "cannot write FILE: REASON"
/// is thrown (a log, a CSV or an event file never keeps half a record).
void append_file_bytes(const std::filesystem::path& file, const std::string& bytes);

/// Unlinks every temporary file a write_atomically in this process is filling right now.
/// Async-signal-safe (atomic loads and unlink only): the SIGINT/SIGTERM handler that
/// install_interrupt_cleanup() (core/main_guard.h) sets calls it before the process dies.
void remove_pending_temporaries() noexcept;

/// How many temporary files are registered as pending right now (for tests).
int pending_temporary_count() noexcept;

/// Reads a whole file; throws InputError naming the file when it cannot be read.
std::string read_text_file(const std::filesystem::path& path);
/// The same for a file a user named as input, in the readers' words: InputError "FILE: is a folder,
/// not a file" or "FILE: cannot be read".
std::string read_input_file(const std::filesystem::path& path);

/// An exclusive lock on a folder (flock on the folder itself: no file is added), held while the
/// object lives and released when its process dies however it dies. igb-train holds one on its
/// run directory while it writes there; igb-bench --resume asks for each run's before it starts.
///
///   auto lock = FolderLock::try_lock(run_dir);
///   if (!lock) throw InputError(run_dir.string() + " is being written by another process");
class FolderLock {
 public:
  /// Locks `dir` (an existing folder); nothing when another process holds the lock.
  /// InputError when the folder cannot be opened.
  static std::unique_ptr<FolderLock> try_lock(const std::filesystem::path& dir);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  explicit FolderLock(int fd) : fd_(fd) {}
  int fd_;
};

/// A fresh folder under the system's temporary directory (`<prefix>-XXXXXX`, by mkdtemp), removed
/// with its content when the object goes. Throws std::runtime_error when it cannot be made.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// Local time formatted with strftime `fmt`.
std::string local_time_string(const char* fmt);

}  // namespace igb
