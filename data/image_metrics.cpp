#include "data/image_metrics.h"

#include <cmath>
#include <limits>

namespace igb::data {

namespace {
at::Tensor shave_border(const at::Tensor& t, int64_t shave) {
  if (shave <= 0) return t;
  int64_t h = t.size(-2), w = t.size(-1);
  TORCH_CHECK(h > 2 * shave && w > 2 * shave, "image of ", h, "x", w, " is too small to shave ",
              shave, " pixels from each border");
  return t.narrow(-2, shave, h - 2 * shave).narrow(-1, shave, w - 2 * shave);
}
}  // namespace

double psnr(const at::Tensor& a, const at::Tensor& b, int64_t shave) {
  TORCH_CHECK(a.sizes() == b.sizes(), "psnr: shapes differ ", a.sizes(), " vs ", b.sizes());
  auto d = shave_border(a.to(torch::kFloat64), shave) - shave_border(b.to(torch::kFloat64), shave);
  double mse = d.pow(2).mean().item<double>();
  if (mse == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(1.0 / mse);
}

double ssim(const at::Tensor& a, const at::Tensor& b, int64_t shave) {
  TORCH_CHECK(a.sizes() == b.sizes(), "ssim: shapes differ ", a.sizes(), " vs ", b.sizes());
  auto x = shave_border(a.to(torch::kFloat64), shave) * 255.0;
  auto y = shave_border(b.to(torch::kFloat64), shave) * 255.0;
  x = x.reshape({1, 1, x.size(-2), x.size(-1)});
  y = y.reshape({1, 1, y.size(-2), y.size(-1)});
  TORCH_CHECK(x.size(-2) >= 11 && x.size(-1) >= 11,
              "ssim needs at least 11x11 pixels after shaving");
  auto g = torch::arange(11, torch::kFloat64) - 5;
  g = torch::exp(-(g * g) / (2 * 1.5 * 1.5));
  auto win = torch::outer(g, g);
  win = (win / win.sum()).reshape({1, 1, 11, 11});
  const double c1 = std::pow(0.01 * 255, 2), c2 = std::pow(0.03 * 255, 2);
  auto mu_x = torch::conv2d(x, win), mu_y = torch::conv2d(y, win);
  auto sxx = torch::conv2d(x * x, win) - mu_x * mu_x;
  auto syy = torch::conv2d(y * y, win) - mu_y * mu_y;
  auto sxy = torch::conv2d(x * y, win) - mu_x * mu_y;
  auto map = ((2 * mu_x * mu_y + c1) * (2 * sxy + c2)) /
             ((mu_x * mu_x + mu_y * mu_y + c1) * (sxx + syy + c2));
  return map.mean().item<double>();
}

}  // namespace igb::data
