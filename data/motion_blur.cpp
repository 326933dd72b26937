#include "data/motion_blur.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "core/rng.h"
#include "data/image.h"

namespace igb::data {

namespace {

/// Adds weight `w` at the real position (x, y) of `k` (size × size, row-major), shared bilinearly
/// among the four nearest pixels; what falls outside is dropped.
void splat(std::vector<double>& k, int64_t size, double x, double y, double w) {
  const double fx = std::floor(x), fy = std::floor(y);
  const double ax = x - fx, ay = y - fy;
  const int64_t ix = static_cast<int64_t>(fx), iy = static_cast<int64_t>(fy);
  const double share[2][2] = {{(1 - ax) * (1 - ay), ax * (1 - ay)}, {(1 - ax) * ay, ax * ay}};
  for (int dy = 0; dy < 2; ++dy)
    for (int dx = 0; dx < 2; ++dx) {
      const int64_t px = ix + dx, py = iy + dy;
      if (px < 0 || py < 0 || px >= size || py >= size) continue;
      k[static_cast<size_t>(py * size + px)] += w * share[dy][dx];
    }
}

/// The kernel of a path (points relative to the centre), normalised to sum 1.
at::Tensor kernel_of_path(const std::vector<std::pair<double, double>>& path, int64_t size) {
  std::vector<double> k(static_cast<size_t>(size * size), 0.0);
  const double c = static_cast<double>(size - 1) / 2;
  for (const auto& [x, y] : path) splat(k, size, c + x, c + y, 1.0);
  double sum = 0;
  for (double v : k) sum += v;
  if (!(sum > 0)) k[static_cast<size_t>((size / 2) * size + size / 2)] = sum = 1;
  auto t = torch::empty({size, size}, torch::kFloat);
  auto* p = t.data_ptr<float>();
  for (size_t i = 0; i < k.size(); ++i) p[i] = static_cast<float>(k[i] / sum);
  return t;
}

void check_size(int64_t size) {
  if (size < 1 || size % 2 == 0)
    throw std::invalid_argument("motion kernel size must be odd and positive");
}

}  // namespace

at::Tensor linear_motion_kernel(int64_t size, double length, double angle_degrees) {
  check_size(size);
  length = std::clamp(length, 1.0, static_cast<double>(size));
  const double a = angle_degrees * M_PI / 180.0;
  const double dx = std::cos(a), dy = -std::sin(a);  // image rows grow downwards
  const int64_t n = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(length * 8)) + 1);
  std::vector<std::pair<double, double>> path;
  for (int64_t i = 0; i < n; ++i) {
    const double t = (static_cast<double>(i) / static_cast<double>(n - 1) - 0.5) * (length - 1);
    path.emplace_back(t * dx, t * dy);
  }
  return kernel_of_path(path, size);
}

at::Tensor shake_motion_kernel(int64_t size, double length, uint64_t seed) {
  check_size(size);
  Rng rng = Rng::from(seed, 0x5ac3);
  // A velocity that keeps its direction (inertia 0.7) with Gaussian-ish jolts, now and then a
  // sharper one; 64 steps.
  const int steps = 64;
  double vx = 0, vy = 0;
  {
    const double a = rng.uniform(0, 2 * M_PI);
    vx = std::cos(a);
    vy = std::sin(a);
  }
  std::vector<std::pair<double, double>> pts = {{0, 0}};
  double x = 0, y = 0, travelled = 0;
  for (int i = 0; i < steps; ++i) {
    const double jolt = rng.coin(0.1) ? 1.5 : 0.4;
    // Sum of uniforms: a cheap, deterministic bell-shaped draw.
    auto bell = [&] { return (rng.sum_of_three() - 1.5) * 2.0; };
    vx = 0.7 * vx + jolt * bell();
    vy = 0.7 * vy + jolt * bell();
    const double speed = std::hypot(vx, vy);
    if (speed > 0) {
      vx /= speed;
      vy /= speed;
    }
    x += vx;
    y += vy;
    travelled += 1;
    pts.emplace_back(x, y);
  }
  // Scale to `length` of path (at most what fits in the kernel), centre on the mean.
  const double extent_limit = static_cast<double>(size - 1) / 2;
  double mx = 0, my = 0;
  for (const auto& [px, py] : pts) mx += px, my += py;
  mx /= static_cast<double>(pts.size());
  my /= static_cast<double>(pts.size());
  double scale = length / travelled, extent = 0;
  for (const auto& [px, py] : pts)
    extent = std::max({extent, std::abs(px - mx) * scale, std::abs(py - my) * scale});
  if (extent > extent_limit) scale *= extent_limit / extent;
  // Densify: 8 points per pixel of path.
  std::vector<std::pair<double, double>> path;
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    const double x0 = (pts[i].first - mx) * scale, y0 = (pts[i].second - my) * scale;
    const double x1 = (pts[i + 1].first - mx) * scale, y1 = (pts[i + 1].second - my) * scale;
    const int64_t n =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil(std::hypot(x1 - x0, y1 - y0) * 8)));
    for (int64_t j = 0; j < n; ++j) {
      const double t = static_cast<double>(j) / static_cast<double>(n);
      path.emplace_back(x0 + t * (x1 - x0), y0 + t * (y1 - y0));
    }
  }
  return kernel_of_path(path, size);
}

at::Tensor random_motion_kernel(uint64_t seed, const MotionBlurOptions& o) {
  Rng rng = Rng::from(seed, 0x6b31);
  const double length = rng.uniform(o.min_length, o.max_length);
  if (rng.coin(o.linear_share))
    return linear_motion_kernel(o.kernel_size, length, rng.uniform(0, 180));
  return shake_motion_kernel(o.kernel_size, length, rng.next());
}

at::Tensor support_of(const at::Tensor& kernel) {
  const int64_t size = kernel.size(0), centre = size / 2;
  const auto taps = kernel.to(at::kDouble).contiguous();
  const auto* v = taps.data_ptr<double>();
  int64_t reach = 0;
  for (int64_t y = 0; y < size; ++y)
    for (int64_t x = 0; x < size; ++x)
      if (v[y * size + x] != 0)
        reach = std::max({reach, std::abs(y - centre), std::abs(x - centre)});
  return kernel.narrow(0, centre - reach, 2 * reach + 1).narrow(1, centre - reach, 2 * reach + 1);
}

at::Tensor blur_image(const at::Tensor& image, const at::Tensor& full_kernel) {
  // A motion kernel fills a few pixels of its square (a 9-pixel line about 20 of 81): each
  // non-zero tap adds a shifted copy of the reflect-padded image, which costs a small fraction of
  // a dense depthwise convolution (data loading shares the cores with training).
  const auto kernel = support_of(full_kernel).to(at::kFloat).contiguous();
  const int64_t c = image.size(0), h = image.size(1), w = image.size(2);
  const int64_t k = kernel.size(0), r = k / 2;
  const auto padded = torch::nn::functional::pad(
                          image.to(at::kFloat).unsqueeze(0),
                          torch::nn::functional::PadFuncOptions({r, r, r, r}).mode(torch::kReflect))
                          .squeeze(0)
                          .contiguous();
  // A true convolution: out(y, x) = Σ K(i, j) · in(y − i + r, x − j + r), i.e. tap (i, j) reads
  // the padded image shifted by (k − 1 − i, k − 1 − j).
  struct Tap {
    int64_t dy, dx;
    float weight;
  };
  std::vector<Tap> taps;
  const float* kv = kernel.data_ptr<float>();
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j)
      if (kv[i * k + j] != 0) taps.push_back({k - 1 - i, k - 1 - j, kv[i * k + j]});
  auto out = torch::zeros({c, h, w}, torch::kFloat);
  const int64_t pw = w + 2 * r, ph = h + 2 * r;
  const float* in = padded.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t y = 0; y < h; ++y) {
      float* row = o + (ch * h + y) * w;
      for (const auto& t : taps) {
        const float* src = in + (ch * ph + y + t.dy) * pw + t.dx;
        for (int64_t x = 0; x < w; ++x) row[x] += t.weight * src[x];
      }
    }
  return out.to(image.dtype());
}

at::Tensor synthetic_motion_blur(const at::Tensor& sharp, uint64_t seed,
                                 const MotionBlurOptions& o) {
  Rng rng = Rng::from(seed, 0x77e1);
  auto blurred = blur_image(sharp, random_motion_kernel(rng.next(), o));
  const double sigma = rng.uniform(0, o.max_noise);
  if (sigma > 0) {
    auto gen = at::detail::createCPUGenerator(rng.next());
    blurred = blurred + torch::randn(blurred.sizes(), gen, blurred.options()) * sigma;
  }
  return quantize_8bit(blurred);
}

}  // namespace igb::data
