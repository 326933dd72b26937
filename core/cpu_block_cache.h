#pragma once

#include <cstddef>
#include <cstdint>

namespace igb {

/// Counters of the large-block cache that tune_allocator() installs.
struct CpuBlockCacheStats {
  int64_t reused = 0;        // large allocations served from the cache
  int64_t fresh = 0;         // large allocations that needed new memory
  int64_t cached_bytes = 0;  // freed large blocks held for reuse now
};

/// Makes LibTorch's CPU allocator keep freed blocks of `min_block` bytes and more (up to
/// `max_cached` bytes in all) and hand them to later allocations of about their size, instead of
/// returning them to the kernel. glibc maps every block above 32 MiB afresh, and touching new pages
/// is slow: AlexNet's 151 MB fully-connected gradient and its temporaries were page-faulted in at
/// every training step. Smaller blocks go to LibTorch's own allocation functions as before. Once
/// per process; later calls change nothing.
void install_cpu_block_cache(size_t min_block, size_t max_cached);

CpuBlockCacheStats cpu_block_cache_stats();

/// Returns every cached block to the system (the counters of reuse stay): a test that counts
/// cached bytes starts from an empty cache whatever ran before it in the process.
void drain_cpu_block_cache();

}  // namespace igb
