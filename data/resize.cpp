#include "data/resize.h"

#include <cmath>

namespace igb::data {

namespace {
double cubic(double x) {
  double a = std::fabs(x), a2 = a * a, a3 = a2 * a;
  if (a <= 1) return 1.5 * a3 - 2.5 * a2 + 1;
  if (a <= 2) return -0.5 * a3 + 2.5 * a2 - 4 * a + 2;
  return 0;
}
}  // namespace

at::Tensor bicubic_resize_matrix(int64_t in_len, int64_t out_len, double scale) {
  const bool shrink = scale < 1;
  const double width = shrink ? 4.0 / scale : 4.0;
  auto m = torch::zeros({out_len, in_len}, torch::kFloat64);
  auto acc = m.accessor<double, 2>();
  const auto taps = static_cast<int64_t>(std::ceil(width)) + 2;
  for (int64_t i = 0; i < out_len; ++i) {
    // 1-based coordinates as in MATLAB's contributions().
    double u = (i + 1) / scale + 0.5 * (1 - 1 / scale);
    auto left = static_cast<int64_t>(std::floor(u - width / 2));
    double sum = 0;
    std::vector<std::pair<int64_t, double>> row;
    for (int64_t t = 0; t < taps; ++t) {
      int64_t j = left + t;  // 1-based source index
      double w = shrink ? scale * cubic(scale * (u - j)) : cubic(u - j);
      if (w == 0) continue;
      // Symmetric padding: ... 2 1 | 1 2 ... n | n n-1 ...
      int64_t period = 2 * in_len;
      int64_t k = ((j - 1) % period + period) % period;
      int64_t src = k < in_len ? k : period - 1 - k;
      row.emplace_back(src, w);
      sum += w;
    }
    for (const auto& [src, w] : row) acc[i][src] += w / sum;
  }
  return m.to(torch::kFloat32);
}

at::Tensor imresize_to(const at::Tensor& image, int64_t out_h, int64_t out_w) {
  const int64_t h = image.size(-2), w = image.size(-1);
  auto x = image.to(torch::kFloat32);
  // MATLAB resizes the dimension that shrinks most first; for equal scales, rows first.
  double sh = static_cast<double>(out_h) / h, sw = static_cast<double>(out_w) / w;
  auto rows = [&](const at::Tensor& t) {
    return torch::matmul(bicubic_resize_matrix(h, out_h, sh), t);
  };
  auto cols = [&](const at::Tensor& t) {
    return torch::matmul(t, bicubic_resize_matrix(w, out_w, sw).t());
  };
  return sw < sh ? rows(cols(x)) : cols(rows(x));
}

at::Tensor imresize(const at::Tensor& image, double scale) {
  auto out_h = static_cast<int64_t>(std::ceil(image.size(-2) * scale - 1e-9));
  auto out_w = static_cast<int64_t>(std::ceil(image.size(-1) * scale - 1e-9));
  const int64_t h = image.size(-2), w = image.size(-1);
  auto x = image.to(torch::kFloat32);
  auto rows = [&](const at::Tensor& t) {
    return torch::matmul(bicubic_resize_matrix(h, out_h, scale), t);
  };
  auto cols = [&](const at::Tensor& t) {
    return torch::matmul(t, bicubic_resize_matrix(w, out_w, scale).t());
  };
  return cols(rows(x));
}

}  // namespace igb::data
