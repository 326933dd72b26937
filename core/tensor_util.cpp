#include "core/tensor_util.h"

#include <torch/types.h>

#include <string>

#include "core/error.h"

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

std::string shape_text(c10::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t i = 0; i < sizes.size(); ++i) text += (i ? "x" : "") + std::to_string(sizes[i]);
  return text + "]";
}

at::Tensor geometric_self_ensemble(const std::function<at::Tensor(const at::Tensor&)>& f,
                                   const at::Tensor& x) {
  if (x.dim() != 4)
    throw InputError("self-ensemble needs images [N, C, H, W], got " + std::to_string(x.dim()) +
                     " dimensions");
  at::Tensor sum;
  for (int t = 0; t < 8; ++t) {
    auto in = x;
    if (t & 1) in = in.flip({3});
    if (t & 2) in = in.flip({2});
    if (t & 4) in = in.transpose(2, 3);
    auto out = f(in.contiguous());
    // The inverse: undo the swap first, then the flips (which commute with each other).
    if (t & 4) out = out.transpose(2, 3);
    if (t & 2) out = out.flip({2});
    if (t & 1) out = out.flip({3});
    if (t > 0 && out.sizes() != sum.sizes())
      throw InputError(
          "self-ensemble: the output for the flipped or transposed input maps back to " +
          shape_text(out.sizes()) + ", not " + shape_text(sum.sizes()) +
          " (the model must take both orientations of the image)");
    sum = t == 0 ? out.clone() : sum.add_(out);
  }
  return sum.div_(8);
}

}  // namespace igb
