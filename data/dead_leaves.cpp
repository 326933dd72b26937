#include "data/dead_leaves.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/rng.h"

namespace igb::data {

namespace {

/// A radius from p(r) ∝ r⁻³ on [r_min, r_max], by inverting its distribution function.
double power_law_radius(Rng& rng, double r_min, double r_max) {
  const double a = 1.0 / (r_min * r_min), b = 1.0 / (r_max * r_max);
  return 1.0 / std::sqrt(a - rng.uniform() * (a - b));
}

/// A colour with the low saturation most of a photograph has: a grey level plus a smaller tint.
cv::Vec3f leaf_colour(Rng& rng) {
  const double grey = rng.uniform(0.02, 0.98);
  const double saturation = rng.coin(0.2) ? rng.uniform(0.2, 0.6) : rng.uniform(0.0, 0.2);
  cv::Vec3f c;
  for (int i = 0; i < 3; ++i) {
    const double tint = rng.uniform(-1.0, 1.0);
    c[i] = static_cast<float>(std::clamp(grey + saturation * tint, 0.0, 1.0));
  }
  return c;
}

/// The mask of one leaf: a disc, an ellipse or a rectangle of "radius" r at (cx, cy).
void draw_leaf_mask(cv::Mat& mask, Rng& rng, double cx, double cy, double r) {
  const cv::Point centre(static_cast<int>(std::lround(cx)), static_cast<int>(std::lround(cy)));
  const double shape = rng.uniform();
  if (shape < 0.6 || r < 2) {
    cv::circle(mask, centre, std::max(1, static_cast<int>(std::lround(r))), 255, -1, cv::LINE_AA);
  } else if (shape < 0.85) {
    const double aspect = rng.uniform(0.3, 1.0), angle = rng.uniform(0, 180);
    const cv::Size axes(static_cast<int>(std::lround(r)),
                        std::max(1, static_cast<int>(std::lround(r * aspect))));
    cv::ellipse(mask, centre, axes, angle, 0, 360, 255, -1, cv::LINE_AA);
  } else {
    const double aspect = rng.uniform(0.3, 1.0), angle = rng.uniform(0, 180);
    const cv::RotatedRect rect(
        cv::Point2f(static_cast<float>(cx), static_cast<float>(cy)),
        cv::Size2f(static_cast<float>(2 * r), static_cast<float>(2 * r * aspect)),
        static_cast<float>(angle));
    cv::Point2f corners[4];
    rect.points(corners);
    std::vector<cv::Point> pts;
    for (const auto& p : corners)
      pts.emplace_back(static_cast<int>(std::lround(p.x)), static_cast<int>(std::lround(p.y)));
    cv::fillConvexPoly(mask, pts, 255, cv::LINE_AA);
  }
}

/// The fill of a large leaf over `box`: stripes, smoothed noise or a linear gradient between
/// two colours.
cv::Mat leaf_texture(const cv::Size& size, Rng& rng, const cv::Vec3f& c0) {
  const cv::Vec3f c1 = leaf_colour(rng);
  cv::Mat v(size, CV_32F);
  const int kind = static_cast<int>(rng.integer(0, 2));
  const double angle = rng.uniform(0, M_PI);
  const double ca = std::cos(angle), sa = std::sin(angle);
  if (kind == 0) {
    const double period = rng.uniform(2.5, 16.0);
    for (int y = 0; y < size.height; ++y)
      for (int x = 0; x < size.width; ++x)
        v.at<float>(y, x) =
            static_cast<float>(0.5 + 0.5 * std::sin(2 * M_PI * (x * ca + y * sa) / period));
  } else if (kind == 1) {
    for (int y = 0; y < size.height; ++y)
      for (int x = 0; x < size.width; ++x) v.at<float>(y, x) = static_cast<float>(rng.uniform());
    cv::GaussianBlur(v, v, cv::Size(0, 0), rng.uniform(0.7, 3.0));
    cv::normalize(v, v, 0, 1, cv::NORM_MINMAX);
  } else {
    const double span = std::max(1, std::max(size.width, size.height));
    for (int y = 0; y < size.height; ++y)
      for (int x = 0; x < size.width; ++x)
        v.at<float>(y, x) = static_cast<float>(std::clamp(
            0.5 + ((x - size.width / 2.0) * ca + (y - size.height / 2.0) * sa) / span, 0.0, 1.0));
  }
  cv::Mat out(size, CV_32FC3);
  for (int y = 0; y < size.height; ++y)
    for (int x = 0; x < size.width; ++x) {
      const float t = v.at<float>(y, x);
      out.at<cv::Vec3f>(y, x) = c0 * (1 - t) + c1 * t;
    }
  return out;
}

/// Blends one leaf into `img` through its anti-aliased mask.
void drop_leaf(cv::Mat& img, Rng& rng, double r_max) {
  const double r = power_law_radius(rng, 1.0, r_max);
  const double cx = rng.uniform(-r, img.cols + r), cy = rng.uniform(-r, img.rows + r);
  const cv::Rect bounds =
      cv::Rect(static_cast<int>(std::floor(cx - r)) - 2, static_cast<int>(std::floor(cy - r)) - 2,
               static_cast<int>(std::ceil(2 * r)) + 5, static_cast<int>(std::ceil(2 * r)) + 5) &
      cv::Rect(0, 0, img.cols, img.rows);
  const cv::Vec3f colour = leaf_colour(rng);
  if (bounds.empty()) return;
  cv::Mat mask = cv::Mat::zeros(bounds.size(), CV_8U);
  draw_leaf_mask(mask, rng, cx - bounds.x, cy - bounds.y, r);
  const bool textured = r > 6 && rng.coin(0.3);
  const cv::Mat fill = textured ? leaf_texture(bounds.size(), rng, colour) : cv::Mat();
  cv::Mat roi = img(bounds);
  for (int y = 0; y < bounds.height; ++y) {
    const auto* m = mask.ptr<uchar>(y);
    auto* p = roi.ptr<cv::Vec3f>(y);
    for (int x = 0; x < bounds.width; ++x) {
      if (m[x] == 0) continue;
      const float a = m[x] / 255.0f;
      const cv::Vec3f c = textured ? fill.at<cv::Vec3f>(y, x) : colour;
      p[x] = p[x] * (1 - a) + c * a;
    }
  }
}

}  // namespace

at::Tensor render_dead_leaves(int64_t height, int64_t width, uint64_t seed) {
  Rng rng = Rng::from(seed, 0xDEAD1EAF);
  cv::Mat img(static_cast<int>(height), static_cast<int>(width), CV_32FC3, leaf_colour(rng));
  const double r_max = std::max<double>(2.0, static_cast<double>(std::min(height, width)) / 2);
  // E[r²] = 2 ln(r_max) for r_min = 1, so this many leaves cover the image about five times over
  // on average and the earliest ones are almost all hidden.
  const double mean_area = M_PI * 2 * std::log(r_max);
  const auto leaves = static_cast<int64_t>(5.0 * static_cast<double>(height * width) / mean_area);
  for (int64_t i = 0; i < leaves; ++i) drop_leaf(img, rng, r_max);
  const double blur = rng.uniform();
  if (blur < 0.3) cv::GaussianBlur(img, img, cv::Size(0, 0), rng.uniform(0.4, 1.2));
  const double noise = rng.uniform(0.0, 0.01);
  for (int y = 0; y < img.rows; ++y) {
    auto* row = img.ptr<cv::Vec3f>(y);
    for (int x = 0; x < img.cols; ++x)
      for (int c = 0; c < 3; ++c) {
        const double n = rng.sum_of_three() - 1.5;
        row[x][c] = std::clamp(static_cast<float>(row[x][c] + noise * 2 * n), 0.0f, 1.0f);
      }
  }
  auto t = torch::from_blob(img.data, {img.rows, img.cols, 3}, torch::kFloat32).clone();
  return t.permute({2, 0, 1}).contiguous();
}

}  // namespace igb::data
