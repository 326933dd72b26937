#include "core/cpu_block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>
#include <unordered_map>

#include "core/torch_compat.h"

namespace igb {

namespace {

// Blocks are their own context (oneDNN's raw_allocate needs that), so a freed pointer is looked up
// among the live large blocks; any other pointer, small or allocated before the cache was
// installed, is freed as LibTorch's default allocator frees it.
class BlockCacheAllocator final : public compat::AllocatorBase {
 public:
  BlockCacheAllocator(size_t min_block, size_t max_cached)
      : min_block_(min_block), max_cached_(max_cached) {}

  c10::DataPtr allocate_bytes(size_t n) const override {
    void* p = n >= min_block_ ? take(n) : c10::alloc_cpu(n);
    c10::profiledCPUMemoryReporter().New(p, n);
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  CpuBlockCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  /// Frees every cached block.
  void drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, p] : free_) c10::free_cpu(p);
    free_.clear();
    stats_.cached_bytes = 0;
  }

  static BlockCacheAllocator* instance;

 private:
  void* take(size_t n) const {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest free block that holds n and wastes at most an eighth of it.
      auto it = free_.lower_bound(n);
      if (it != free_.end() && it->first - n <= n / 8) {
        void* p = it->second;
        live_[p] = it->first;
        stats_.cached_bytes -= static_cast<int64_t>(it->first);
        free_.erase(it);
        ++stats_.reused;
        return p;
      }
      ++stats_.fresh;
    }
    void* p = c10::alloc_cpu(n);
    std::lock_guard<std::mutex> lock(mutex_);
    live_[p] = n;
    return p;
  }

  static void release(void* p) {
    c10::profiledCPUMemoryReporter().Delete(p);
    if (p == nullptr) return;
    auto* self = instance;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->live_.find(p);
      if (it != self->live_.end()) {
        const size_t size = it->second;
        self->live_.erase(it);
        if (static_cast<size_t>(self->stats_.cached_bytes) + size <= self->max_cached_) {
          self->free_.emplace(size, p);
          self->stats_.cached_bytes += static_cast<int64_t>(size);
          return;
        }
      }
    }
    c10::free_cpu(p);
  }

  size_t min_block_, max_cached_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, size_t> live_;
  mutable std::multimap<size_t, void*> free_;
  mutable CpuBlockCacheStats stats_;
};

BlockCacheAllocator* BlockCacheAllocator::instance = nullptr;

}  // namespace

void install_cpu_block_cache(size_t min_block, size_t max_cached) {
  static std::once_flag once;
  std::call_once(once, [&] {
    // Never destroyed: tensors may outlive main.
    BlockCacheAllocator::instance = new BlockCacheAllocator(min_block, max_cached);
    c10::SetCPUAllocator(BlockCacheAllocator::instance, /*priority=*/0);
  });
}

void drain_cpu_block_cache() {
  if (auto* a = BlockCacheAllocator::instance) a->drain();
}

CpuBlockCacheStats cpu_block_cache_stats() {
  auto* a = BlockCacheAllocator::instance;
  return a != nullptr ? a->stats() : CpuBlockCacheStats{};
}

}  // namespace igb
