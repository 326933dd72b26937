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

}  // namespace igb
