#include "runtime/int8_pairs.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <dnnl.hpp>

namespace igb::runtime {

namespace {

constexpr int64_t kLane = 32767;

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "SSE4.1";
    case dnnl::cpu_isa::avx:
      return "AVX";
    case dnnl::cpu_isa::avx2:
      return "AVX2";
    case dnnl::cpu_isa::avx2_vnni:
      return "AVX2 VNNI";
    case dnnl::cpu_isa::avx512_mic:
      return "AVX-512 (Xeon Phi)";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "AVX-512 (Xeon Phi, 4ops)";
    case dnnl::cpu_isa::avx512_core:
      return "AVX-512";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "AVX-512 VNNI";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "AVX-512 BF16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "AMX";
    default:
      return "generic (no JIT kernels)";
  }
}

}  // namespace

const Int8Isa& int8_isa() {
  static const Int8Isa isa = [] {
    const auto effective = dnnl::get_effective_cpu_isa();
    Int8Isa out;
    out.name = isa_name(effective);
    // The AVX-512 VNNI bit (set in BF16 and AMX as well) means vpdpbusd's 32-bit sums. AVX2
    // VNNI is counted as saturating: oneDNN 2.6 does not use it in every int8 kernel.
    const auto bits = static_cast<unsigned>(effective);
    const auto vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
    out.pairs_saturate = (bits & vnni) != vnni;
    return out;
  }();
  return isa;
}

int64_t largest_pair(const at::Tensor& q) {
  const auto w = q.to(at::kInt).reshape({q.size(0), -1});
  if (w.size(1) < 2) return 0;
  const auto pos = w.clamp_min(0), neg = (-w).clamp_min(0);
  const auto top2 = [](const at::Tensor& t) { return std::get<0>(t.topk(2, 1)).sum(1); };
  return std::max(top2(pos).max().item<int64_t>(), top2(neg).max().item<int64_t>());
}

bool int8_sums_exact(const Int8Isa& isa, const at::Tensor& q, bool signed_input, int64_t top,
                     bool depthwise) {
  if (!isa.pairs_saturate) return true;
  if (signed_input) return false;
  return depthwise || top * largest_pair(q) <= kLane;
}

at::Tensor split_weights(const at::Tensor& q, int64_t groups, bool signed_input) {
  const auto other = signed_input ? -q : q;
  if (groups == 1) return at::cat({q, other}, 1).contiguous();
  auto shape = q.sizes().vec();
  std::vector<int64_t> grouped = {groups, shape[0] / groups};
  grouped.insert(grouped.end(), shape.begin() + 1, shape.end());
  auto out = at::cat({q.reshape(grouped), other.reshape(grouped)}, 2);
  shape[1] *= 2;
  return out.reshape(shape).contiguous();
}

Int8SplitStep::Int8SplitStep(int src, int dst, int64_t rows, int64_t channels, int64_t groups,
                             bool signed_input)
    : src_(src),
      dst_(dst),
      rows_(rows),
      channels_(channels),
      groups_(groups),
      signed_(signed_input) {
  reads = {src_};
  writes = {dst_};
  info.kind = "Split";
  info.native = true;
}

void Int8SplitStep::run(Plan& plan) {
  const auto* src = static_cast<const uint8_t*>(plan.memory(src_).get_data_handle());
  auto* dst = static_cast<uint8_t*>(plan.memory(dst_).get_data_handle());
  const int64_t c = channels_, per = channels_ / groups_;
  const bool is_signed = signed_;
  at::parallel_for(0, rows_, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const uint8_t* in = src + r * c;
      uint8_t* out = dst + r * 2 * c;
      for (int64_t g = 0; g < groups_; ++g, in += per, out += 2 * per) {
        if (is_signed) {
          const auto* v = reinterpret_cast<const int8_t*>(in);
          for (int64_t k = 0; k < per; ++k) {
            const int x = v[k];
            out[k] = static_cast<uint8_t>(x > 0 ? x : 0);
            out[per + k] = static_cast<uint8_t>(x < 0 ? -x : 0);
          }
        } else {
          for (int64_t k = 0; k < per; ++k) {
            const int x = in[k];
            const int lo = x < 128 ? x : 128;
            out[k] = static_cast<uint8_t>(lo);
            out[per + k] = static_cast<uint8_t>(x - lo);
          }
        }
      }
    }
  });
}

}  // namespace igb::runtime
