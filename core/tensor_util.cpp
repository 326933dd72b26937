#include "core/tensor_util.h"

#include <torch/types.h>

namespace igb {

int64_t count_zeros(const at::Tensor& t) { return t.detach().eq(0).sum().item<int64_t>(); }

double zero_fraction(const at::Tensor& t) {
  if (t.numel() == 0) return 0;
  return static_cast<double>(count_zeros(t)) / static_cast<double>(t.numel());
}

at::Tensor index_tensor(const std::vector<int64_t>& indices, c10::Device device) {
  return torch::tensor(indices, torch::TensorOptions().dtype(torch::kLong).device(device));
}

at::Tensor fast_pixel_shuffle(const at::Tensor& x, int64_t r) {
  if (x.dim() != 4 || r < 1 || x.size(1) % (r * r) != 0) return at::pixel_shuffle(x, r);
  const int64_t n = x.size(0), c = x.size(1) / (r * r), h = x.size(2), w = x.size(3);
  // Channel c·r² + i·r + j holds output pixel (h·r + i, w·r + j).
  return x.reshape({n, c, r, r, h, w}).permute({0, 1, 4, 2, 5, 3}).reshape({n, c, h * r, w * r});
}

at::Tensor fast_pixel_unshuffle(const at::Tensor& x, int64_t r) {
  if (x.dim() != 4 || r < 1 || x.size(2) % r != 0 || x.size(3) % r != 0)
    return at::pixel_unshuffle(x, r);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2) / r, w = x.size(3) / r;
  return x.reshape({n, c, h, r, w, r}).permute({0, 1, 3, 5, 2, 4}).reshape({n, c * r * r, h, w});
}

}  // namespace igb
