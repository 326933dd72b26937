#include "data/synthetic_shapes.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/rng.h"

namespace igb::data {

const std::vector<std::string>& synthetic_shape_classes() {
  static const std::vector<std::string> names = {"circle", "square", "triangle", "star", "cross",
                                                 "ring",   "bar",    "crescent", "ell",  "frame"};
  return names;
}

namespace {

cv::Point2f rotate(cv::Point2f p, double a) {
  return {static_cast<float>(p.x * std::cos(a) - p.y * std::sin(a)),
          static_cast<float>(p.x * std::sin(a) + p.y * std::cos(a))};
}

std::vector<cv::Point> place(const std::vector<cv::Point2f>& unit, cv::Point2f c, double r,
                             double a, int shift) {
  std::vector<cv::Point> pts;
  for (const auto& u : unit) {
    auto p = rotate(u, a) * static_cast<float>(r) + c;
    pts.emplace_back(static_cast<int>(std::lround(p.x * (1 << shift))),
                     static_cast<int>(std::lround(p.y * (1 << shift))));
  }
  return pts;
}

std::vector<cv::Point2f> regular(int n, double phase, double radius = 1.0) {
  std::vector<cv::Point2f> v;
  for (int i = 0; i < n; ++i) {
    double t = phase + 2 * M_PI * i / n;
    v.emplace_back(static_cast<float>(radius * std::cos(t)),
                   static_cast<float>(radius * std::sin(t)));
  }
  return v;
}

void fill(cv::Mat& img, const std::vector<std::vector<cv::Point2f>>& polys, cv::Point2f c, double r,
          double a, const cv::Scalar& color) {
  constexpr int kShift = 4;  // sub-pixel precision for anti-aliasing
  std::vector<std::vector<cv::Point>> pts;
  for (const auto& p : polys) pts.push_back(place(p, c, r, a, kShift));
  cv::fillPoly(img, pts, color, cv::LINE_AA, kShift);
}

}  // namespace

namespace {

/// Fills `img` with a gradient between two random colours; returns the first (the background
/// the shape must stand out from).
cv::Vec3d draw_background(cv::Mat& img, Rng& rng) {
  const int n = img.rows;
  const auto v0 = rng.uniform3(0, 255);
  const cv::Vec3d b0(v0[0], v0[1], v0[2]);
  const auto dv = rng.uniform3(-80, 80);
  const cv::Vec3d b1 = b0 + cv::Vec3d(dv[0], dv[1], dv[2]);
  double ga = rng.uniform(0, 2 * M_PI);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x) {
      double t = 0.5 + ((x - n / 2.0) * std::cos(ga) + (y - n / 2.0) * std::sin(ga)) / (1.5 * n);
      cv::Vec3d c = b0 * (1 - t) + b1 * t;
      img.at<cv::Vec3b>(y, x) =
          cv::Vec3b(cv::saturate_cast<uchar>(c[0]), cv::saturate_cast<uchar>(c[1]),
                    cv::saturate_cast<uchar>(c[2]));
    }
  return b0;
}

/// Clutter: one to four strokes and dots that are not the class shape.
void draw_clutter(cv::Mat& img, Rng& rng) {
  const int n = img.rows;
  int clutter = static_cast<int>(rng.integer(1, 4));
  for (int i = 0; i < clutter; ++i) {
    const auto v = rng.uniform3(0, 255);
    const cv::Scalar col(v[0], v[1], v[2]);
    // y before x: the order this generator has always drawn points in.
    const int y0 = static_cast<int>(rng.integer(0, n - 1));
    const cv::Point p0(static_cast<int>(rng.integer(0, n - 1)), y0);
    if (rng.coin()) {
      const int dy = static_cast<int>(rng.integer(-n / 4, n / 4));
      const cv::Point p1 = p0 + cv::Point(static_cast<int>(rng.integer(-n / 4, n / 4)), dy);
      cv::line(img, p0, p1, col, 1, cv::LINE_AA);
    } else {
      cv::circle(img, p0, static_cast<int>(rng.integer(1, 2)), col, -1, cv::LINE_AA);
    }
  }
}

/// The shape of class `label` at centre `c`, radius `r`, angle `a`, in `col` (holes in `bg`).
void draw_class_shape(cv::Mat& img, int64_t label, cv::Point2f c, double r, double a,
                      const cv::Scalar& col, const cv::Scalar& bg) {
  switch (label) {
    case 0:
      fill(img, {regular(48, 0)}, c, r, a, col);
      break;
    case 1:
      fill(img, {regular(4, M_PI / 4)}, c, r, a, col);
      break;
    case 2:
      fill(img, {regular(3, -M_PI / 2)}, c, r, a, col);
      break;
    case 3: {
      std::vector<cv::Point2f> star;
      for (int i = 0; i < 10; ++i) {
        double t = -M_PI / 2 + M_PI * i / 5, rr = i % 2 ? 0.42 : 1.0;
        star.emplace_back(static_cast<float>(rr * std::cos(t)),
                          static_cast<float>(rr * std::sin(t)));
      }
      fill(img, {star}, c, r, a, col);
      break;
    }
    case 4: {
      const float w = 0.28f;
      fill(img, {{{-1, -w}, {1, -w}, {1, w}, {-1, w}}, {{-w, -1}, {w, -1}, {w, 1}, {-w, 1}}}, c, r,
           a, col);
      break;
    }
    case 5:
      fill(img, {regular(48, 0)}, c, r, a, col);
      fill(img, {regular(48, 0, 0.55)}, c, r, a, bg);
      break;
    case 6:
      fill(img, {{{-1, -0.25f}, {1, -0.25f}, {1, 0.25f}, {-1, 0.25f}}}, c, r, a, col);
      break;
    case 7:
      fill(img, {regular(48, 0)}, c, r, a, col);
      fill(img, {regular(48, 0)}, c + rotate({0.45f, 0}, a) * static_cast<float>(r), r * 0.85, a,
           bg);
      break;
    case 8:
      fill(img, {{{-0.8f, -1}, {-0.3f, -1}, {-0.3f, 0.5f}, {0.8f, 0.5f}, {0.8f, 1}, {-0.8f, 1}}}, c,
           r, a, col);
      break;
    default:
      fill(img, {regular(4, M_PI / 4)}, c, r, a, col);
      fill(img, {regular(4, M_PI / 4, 0.6)}, c, r, a, bg);
      break;
  }
}

/// Sensor noise: per pixel and channel, roughly Gaussian of a random sigma in [2, 12].
void add_noise(cv::Mat& img, Rng& rng) {
  const int n = img.rows;
  const double sigma = rng.uniform(2, 12);
  for (int y = 0; y < n; ++y)
    for (int x = 0; x < n; ++x)
      for (int k = 0; k < 3; ++k) {
        double v = img.at<cv::Vec3b>(y, x)[k] + sigma * (rng.sum_of_three() - 1.5) * 2;
        img.at<cv::Vec3b>(y, x)[k] = cv::saturate_cast<uchar>(v);
      }
}

}  // namespace

at::Tensor render_synthetic_shape(int64_t label, int64_t size, uint64_t seed) {
  Rng rng = Rng::from(seed, 0x54A9E5, static_cast<uint64_t>(label));
  const int n = static_cast<int>(size);
  cv::Mat img(n, n, CV_8UC3);
  const cv::Vec3d b0 = draw_background(img, rng);
  draw_clutter(img, rng);
  const double r = rng.uniform(0.22, 0.36) * n;  // shape radius
  const auto cy = static_cast<float>(rng.uniform(r * 0.9, n - r * 0.9));
  const cv::Point2f c(static_cast<float>(rng.uniform(r * 0.9, n - r * 0.9)), cy);
  const double a = rng.uniform(0, 2 * M_PI);
  // A colour far enough from the background (after 21 tries, the last one).
  cv::Scalar col;
  for (int tries = 0;; ++tries) {
    const auto v = rng.uniform3(0, 255);
    const cv::Vec3d cc(v[0], v[1], v[2]);
    if (cv::norm(cc - b0) > 120 || tries > 20) {
      col = cv::Scalar(cc[0], cc[1], cc[2]);
      break;
    }
  }
  draw_class_shape(img, label, c, r, a, col, cv::Scalar(b0[0], b0[1], b0[2]));
  add_noise(img, rng);
  auto t = torch::from_blob(img.data, {n, n, 3}, torch::kUInt8).clone();
  return t.permute({2, 0, 1}).contiguous();
}

}  // namespace igb::data
