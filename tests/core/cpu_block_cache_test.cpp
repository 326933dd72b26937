// The large-block cache behind LibTorch's CPU allocator (core/cpu_block_cache.h). Each test runs in
// a process of its own under CTest, so installing the cache here touches no other test; each
// drains the cache first, so the binary run as one process passes too.
#include "core/cpu_block_cache.h"

#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

namespace igb {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

}  // namespace

TEST(CpuBlockCache, AFreedLargeBlockServesTheNextAllocationOfItsSize) {
  install_cpu_block_cache(kMiB, 8 * kMiB);
  drain_cpu_block_cache();
  const auto before = cpu_block_cache_stats();
  void* first = nullptr;
  {
    auto a = torch::full({1024, 1024}, 3.0f);  // 4 MiB
    first = a.data_ptr();
  }
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes - before.cached_bytes, 4 * 1024 * 1024);
  // A slightly smaller request (within an eighth) takes the same block; its values are its own.
  auto b = torch::arange(1000 * 1024, torch::kFloat32);
  const auto after = cpu_block_cache_stats();
  EXPECT_EQ(b.data_ptr(), first);
  EXPECT_EQ(after.reused - before.reused, 1);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
  EXPECT_EQ(b[12345].item<float>(), 12345.0f);
  EXPECT_EQ(b[1023999].item<float>(), 1023999.0f);
  // Much smaller requests and small tensors do not take it.
  auto c = torch::zeros({256, 1024});  // 1 MiB: large, but a quarter of the free block
  EXPECT_EQ(cpu_block_cache_stats().fresh - after.fresh, 1);
  auto d = torch::ones({10});
  EXPECT_EQ(cpu_block_cache_stats().fresh - after.fresh, 1);
  EXPECT_EQ(d.sum().item<float>(), 10.0f);
}

TEST(CpuBlockCache, HoldsNoMoreThanItsLimitAndServesRawAllocations) {
  install_cpu_block_cache(kMiB, 8 * kMiB);
  drain_cpu_block_cache();
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 0);
  {
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < 5; ++i) blocks.push_back(torch::empty({3 * 1024 * 1024 / 4}));  // 3 MiB
  }
  // Two 3 MiB blocks fit in 8 MiB; the other three went back to the system.
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 6 * 1024 * 1024);
  // oneDNN allocates through raw_allocate and frees by pointer alone.
  c10::Allocator* a = c10::GetCPUAllocator();
  void* p = a->raw_allocate(3 * kMiB);
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 3 * 1024 * 1024);
  static_cast<float*>(p)[3 * kMiB / 4 - 1] = 1.0f;
  a->raw_deallocate(p);
  EXPECT_EQ(cpu_block_cache_stats().cached_bytes, 6 * 1024 * 1024);
  // A convolution through oneDNN with large buffers gives LibTorch's result with the cache
  // installed, twice (the second time on reused blocks).
  torch::manual_seed(1);
  const auto x = torch::randn({4, 16, 128, 128});
  const auto w = torch::randn({32, 16, 3, 3});
  const auto y1 = torch::conv2d(x, w, {}, 1, 1);
  const auto y2 = torch::conv2d(x, w, {}, 1, 1);
  EXPECT_TRUE(torch::equal(y1, y2));
  const auto ref = torch::conv2d(x.to(torch::kFloat64), w.to(torch::kFloat64), {}, 1, 1);
  EXPECT_LT((y1.to(torch::kFloat64) - ref).abs().max().item<double>(), 1e-3);
}

}  // namespace igb
