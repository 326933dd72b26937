#include "core/host.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/Parallel.h>

#include "core/cpu_block_cache.h"
#include "core/error.h"

namespace igb {

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      const size_t at = c == std::string::npos ? c : line.find_first_not_of(" \t", c + 1);
      if (at != std::string::npos) return line.substr(at);
    }
  return "unknown CPU";
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == 0) return "unknown host";
  return host;
}

std::string host_identity() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  return host_name() + (boot.empty() ? "" : " " + boot);
}

double process_cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  const auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
  };
  return ms(u.ru_utime) + ms(u.ru_stime);
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

void tune_allocator() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
  // Blocks above the mmap threshold: kept by LibTorch's allocator instead, up to 2 GiB or an
  // eighth of the memory.
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t memory = pages > 0 && page > 0
                            ? static_cast<size_t>(pages) * static_cast<size_t>(page)
                            : size_t{16} << 30;
  size_t cap = std::min(size_t{2} << 30, memory / 8);
  // IGB_CPU_BLOCK_CACHE_MB sets the limit in MiB; 0 leaves LibTorch's allocator as it is.
  if (const char* mb = std::getenv("IGB_CPU_BLOCK_CACHE_MB"); mb != nullptr && *mb != '\0') {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(mb, &end, 10);
    if (end == nullptr || *end != '\0' || *mb == '-' || v > (1ull << 24))
      throw InputError(std::string("IGB_CPU_BLOCK_CACHE_MB is '") + mb +
                       "'; it takes a whole number of MiB up to 16777216 (0 turns the cache off)");
    cap = static_cast<size_t>(v) << 20;
  }
  if (cap > 0) install_cpu_block_cache(size_t{32} << 20, cap);
}

namespace {

// The OpenMP runtime is LibTorch's own (libgomp), already loaded: looked up rather than linked, so
// that no second OpenMP runtime comes in with the compiler.
using SetThreads = void (*)(int);
SetThreads omp_set_threads() {
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return set;
}

}  // namespace

SerialScope::SerialScope() {
  // LibTorch sets a thread's OpenMP thread count to its global one at the thread's first parallel
  // operator (get_num_threads runs that first): lowered after it, the count stays lowered.
  previous_ = at::get_num_threads();
  if (previous_ > 1 && omp_set_threads()) omp_set_threads()(1);
}

SerialScope::~SerialScope() {
  if (previous_ > 1 && omp_set_threads()) omp_set_threads()(previous_);
}

}  // namespace igb
