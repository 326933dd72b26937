#pragma once
// The host this process runs on: its CPU and name, the CPU time and cores it has, and how its
// allocator and thread pools are tuned for training (not the runtime/ folder: that is the inference
// runtime).

#include <string>

namespace igb {

/// The CPU's model name from /proc/cpuinfo ("unknown CPU" when it cannot be read).
std::string cpu_name();

/// This machine's host name ("unknown host" when it cannot be read).
std::string host_name();

/// What tells this machine's processes from another machine's: the host name and the kernel's
/// boot id (two containers or boots of the same name differ).
std::string host_identity();

/// CPU time this process has used, user and system, all threads, ms.
double process_cpu_ms();

/// The cores this process may run on (its CPU affinity; the machine's count when unknown).
int usable_cores();

/// Keeps freed tensor memory in the process heap instead of returning it to the kernel: glibc
/// serves blocks above its mmap threshold with fresh mappings, so every large activation of every
/// training step would be page-faulted in anew. Raises the mmap threshold to its 32 MiB maximum and
/// the trim threshold to 1 GiB (about 5% more training throughput for ResNet-20 on CPU), and keeps
/// freed blocks above 32 MiB in LibTorch's CPU allocator for reuse, up to 2 GiB or an eighth of the
/// memory (install_cpu_block_cache: AlexNet's training steps 5.5x faster); the environment
/// variable IGB_CPU_BLOCK_CACHE_MB sets that limit in MiB, 0 turning the cache off (InputError
/// when it is not a whole number).
void tune_allocator();

/// While it lives, LibTorch's parallel operators run serially on the thread that made it; other
/// threads keep their thread count. Data loading uses it: a batch is then the same bits whatever
/// the thread count and whichever thread builds it, and a loader's worker threads open no OpenMP
/// teams of their own. Those teams' threads would join the ones the training step runs on, and
/// once OpenMP manages more threads than there are cores it stops spinning between parallel
/// regions and sleeps in the kernel instead (18% of a deblurring step's time on two cores). Does
/// nothing in a LibTorch built without OpenMP.
class SerialScope {
 public:
  SerialScope();
  ~SerialScope();
  SerialScope(const SerialScope&) = delete;
  SerialScope& operator=(const SerialScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace igb
