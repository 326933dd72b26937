// What differs between the LibTorch generations igb builds against: Debian's 1.13 (CI, every CPU
// machine) and 2.x (a PyTorch 2.x install on a GPU machine, docs/gpu.md). Every version test of
// the project is here; the rest of the code calls these and stays free of #if.
#pragma once

#include <ATen/autocast_mode.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>
#include <cstring>

/// True when the LibTorch compiled against is at least major.minor.
#define IGB_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||      \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace igb::compat {

/// Autocast on `device` (CPU or CUDA). LibTorch 2.4 took the device as an argument and
/// deprecated the per-device functions 1.13 has (is_enabled / is_cpu_enabled, ...).
inline bool autocast_enabled(c10::DeviceType device) {
#if IGB_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool enabled) {
#if IGB_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_enabled(enabled);
  else
    at::autocast::set_cpu_enabled(enabled);
#endif
}

/// The lower precision autocast casts to on `device`.
inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
#if IGB_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
#if IGB_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(dtype);
  else
    at::autocast::set_autocast_cpu_dtype(dtype);
#endif
}

/// A c10::Allocator both generations accept. 1.13 declares `allocate` const; 2.x does not, and
/// adds the pure `copy_data`. A subclass implements allocate_bytes; both forms of allocate are
/// defined here (the one the base declares overrides it, the other is an overload), and
/// copy_data copies bytes as LibTorch's own CPU allocator does.
class AllocatorBase : public c10::Allocator {
 public:
  // Without `override`: which of the two overrides depends on the version.
  c10::DataPtr allocate(size_t n) const { return allocate_bytes(n); }
  c10::DataPtr allocate(size_t n) { return allocate_bytes(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }

 protected:
  virtual c10::DataPtr allocate_bytes(size_t n) const = 0;
};

}  // namespace igb::compat
