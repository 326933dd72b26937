#pragma once

// The convolution algorithms measured on this machine, kept so that every process of the machine
// picks the same kernels and computes the same bits, and the timing that decides between them.
// Internal to runtime/.

#include <dnnl.hpp>
#include <functional>
#include <string>

namespace igb::runtime {

/// Whether the convolution described by `key` (its geometry and thread count) runs faster with
/// oneDNN's Winograd kernel than with the direct one on this machine. The first time a key is
/// seen, `measure` decides and the answer is stored in cache_dir("conv-algorithms")/<host and
/// CPU>.json (core/cache_dir.h); later calls, in this process or another, read it. A cache that
/// cannot be read or written costs a measurement, nothing else.
bool winograd_pays(const std::string& key, const std::function<bool()>& measure);

/// Whether convolution `a` runs faster than `b` on this machine, timed on zeroed buffers of
/// their own layouts (what winograd_pays() is given to measure).
bool runs_faster(const dnnl::convolution_forward::primitive_desc& a,
                 const dnnl::convolution_forward::primitive_desc& b);

}  // namespace igb::runtime
