#include "core/runtime.h"

#include <malloc.h>

namespace igb {

void tune_allocator() {
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
  mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
}

}  // namespace igb
