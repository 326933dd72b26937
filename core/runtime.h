#pragma once

namespace igb {

/// Keeps freed tensor memory in the process heap instead of returning it to the kernel: glibc
/// serves blocks above its mmap threshold with fresh mappings, so every large activation of every
/// training step would be page-faulted in anew. Raises the mmap threshold to its 32 MiB maximum and
/// the trim threshold to 1 GiB (about 5% more training throughput for ResNet-20 on CPU).
void tune_allocator();

}  // namespace igb
