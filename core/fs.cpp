#include "core/fs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace igb {

namespace fs = std::filesystem;

namespace {

// The temporary files being written, where a signal handler can reach them. This is the one
// mutable global outside the registries: a handler has no other way to find them, and it may
// only use atomics and fixed storage (no locks, no allocation). A slot is free (0), being filled
// (1) or holds a path the handler may unlink (2).
constexpr int kPendingSlots = 64;
constexpr size_t kPendingPathMax = 4096;
struct PendingSlot {
  std::atomic<int> state{0};
  char path[kPendingPathMax];
};
PendingSlot g_pending[kPendingSlots];
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs lock-free atomics");

// Registers `path` for the lifetime of the object. A path too long or no free slot just goes
// unregistered: the file is then still removed on an exception, only not on a signal.
class PendingTemporary {
 public:
  explicit PendingTemporary(const fs::path& path) {
    const std::string& s = path.native();
    if (s.size() >= kPendingPathMax) return;
    for (int i = 0; i < kPendingSlots; ++i) {
      int expected = 0;
      if (g_pending[i].state.compare_exchange_strong(expected, 1)) {
        std::memcpy(g_pending[i].path, s.c_str(), s.size() + 1);
        g_pending[i].state.store(2);
        slot_ = i;
        return;
      }
    }
  }
  ~PendingTemporary() {
    if (slot_ >= 0) g_pending[slot_].state.store(0);
  }
  PendingTemporary(const PendingTemporary&) = delete;
  PendingTemporary& operator=(const PendingTemporary&) = delete;

 private:
  int slot_ = -1;
};

// fsync of a file or directory by path. A file that cannot be synced is an error (its data may not
// be on disk); a directory is synced on a best-effort basis, since some file systems refuse it and
// the rename has already happened.
void sync_path(const fs::path& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) {
    if (directory) return;
    throw InputError("cannot write " + path.string() + ": " + std::strerror(errno));
  }
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0 && !directory)
    throw InputError("cannot write " + path.string() + ": " + std::strerror(err));
}

}  // namespace

void remove_pending_temporaries() noexcept {
  for (auto& slot : g_pending)
    if (slot.state.load() == 2) ::unlink(slot.path);
}

int pending_temporary_count() noexcept {
  int n = 0;
  for (auto& slot : g_pending) n += slot.state.load() != 0;
  return n;
}

void write_atomically(const fs::path& path, const std::function<void(const fs::path& tmp)>& write) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  PendingTemporary pending(tmp);
  try {
    write(tmp);
    sync_path(tmp, false);
    fs::rename(tmp, path);
  } catch (const fs::filesystem_error& e) {
    // The system's reason, about the file the user named (not the temporary one).
    std::error_code ec;
    fs::remove(tmp, ec);
    throw InputError("cannot write " + path.string() + ": " + e.code().message());
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  sync_path(path.has_parent_path() ? path.parent_path() : fs::path("."), true);
}

namespace {

/// Writes `bytes` to the open descriptor `fd` whole, retrying short writes and EINTR; 0, or the
/// errno of the write that failed (ENOSPC for a write of nothing).
int write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : ENOSPC;
    done += static_cast<size_t>(n);
  }
  return 0;
}

/// Opens `file` with `flags`, lets `write` fill it (returning an errno or 0), and closes it; an
/// error is InputError "cannot write SHOWN: REASON".
void write_through(const fs::path& file, int flags, const fs::path& shown,
                   const std::function<int(int fd)>& write) {
  auto refuse = [&](int error) {
    throw InputError("cannot write " + shown.string() + ": " + std::strerror(error));
  };
  const int fd = ::open(file.c_str(), flags | O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) refuse(errno);
  if (const int error = write(fd)) {
    ::close(fd);
    refuse(error);
  }
  if (::close(fd) != 0) refuse(errno);
}

}  // namespace

void write_file_bytes(const fs::path& file, const std::string& bytes, const fs::path& shown) {
  write_through(file, O_TRUNC, shown, [&](int fd) { return write_all(fd, bytes); });
}

void append_file_bytes(const fs::path& file, const std::string& bytes) {
  write_through(file, O_APPEND, file, [&](int fd) {
    const off_t before = ::lseek(fd, 0, SEEK_END);
    const int error = write_all(fd, bytes);
    // A refused append is cut back to the file's old length (if the cut fails too, the write's
    // reason is still the one to report).
    if (error && before >= 0) (void)!::ftruncate(fd, before);
    return error;
  });
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  write_atomically(path, [&](const fs::path& tmp) { write_file_bytes(tmp, text, path); });
}

std::string read_text_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot read file " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<FolderLock> FolderLock::try_lock(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw InputError("cannot open the folder " + dir.string() + ": " + strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return nullptr;
  }
  return std::unique_ptr<FolderLock>(new FolderLock(fd));
}

FolderLock::~FolderLock() { ::close(fd_); }

std::string read_input_file(const fs::path& path) {
  if (fs::is_directory(path)) throw InputError(path.string() + ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot be read");
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

TempDir::TempDir(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data()))
    throw std::runtime_error("cannot create a temporary folder " + pattern + ": " +
                             std::strerror(errno));
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace igb
