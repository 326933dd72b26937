#include "data/synthetic_images.h"

#include <cmath>
#include <opencv2/imgproc.hpp>

#include "core/rng.h"

namespace igb::data {

namespace {

cv::Scalar random_color(Rng& rng) {
  const auto v = rng.uniform3(0, 255);
  return cv::Scalar(v[0], v[1], v[2]);
}

void gradient_background(cv::Mat& img, Rng& rng) {
  const auto va = rng.uniform3(0, 255);
  const auto vb = rng.uniform3(0, 255);
  cv::Vec3f a(static_cast<float>(va[0]), static_cast<float>(va[1]), static_cast<float>(va[2]));
  cv::Vec3f b(static_cast<float>(vb[0]), static_cast<float>(vb[1]), static_cast<float>(vb[2]));
  const bool radial = rng.coin(0.3);
  const double angle = rng.uniform(0, 2 * M_PI);
  const double cx = rng.uniform(0, img.cols), cy = rng.uniform(0, img.rows);
  const double diag = std::hypot(img.cols, img.rows);
  for (int y = 0; y < img.rows; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = 0; x < img.cols; ++x) {
      double t = radial ? std::hypot(x - cx, y - cy) / diag
                        : 0.5 + ((x - img.cols / 2.0) * std::cos(angle) +
                                 (y - img.rows / 2.0) * std::sin(angle)) /
                                    diag;
      t = std::min(1.0, std::max(0.0, t));
      cv::Vec3f c = a * (1 - t) + b * t;
      row[x] = cv::Vec3b(cv::saturate_cast<uchar>(c[0]), cv::saturate_cast<uchar>(c[1]),
                         cv::saturate_cast<uchar>(c[2]));
    }
  }
}

// A texture tile: stripes, checkers or smoothed noise, in two colours.
cv::Mat texture(int h, int w, Rng& rng) {
  cv::Mat t(h, w, CV_8UC3);
  // Components drawn last first, as uniform3 does.
  cv::Vec3b c0, c1;
  for (int i = 2; i >= 0; --i) c0[i] = static_cast<uchar>(rng.integer(0, 255));
  for (int i = 2; i >= 0; --i) c1[i] = static_cast<uchar>(rng.integer(0, 255));
  int kind = static_cast<int>(rng.integer(0, 2));
  double period = rng.uniform(2.5, 12.0), angle = rng.uniform(0, M_PI);
  double ca = std::cos(angle), sa = std::sin(angle);
  cv::Mat noise;
  if (kind == 2) {
    noise.create(h, w, CV_32F);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) noise.at<float>(y, x) = static_cast<float>(rng.uniform());
    double sigma = rng.uniform(0.6, 2.5);
    cv::GaussianBlur(noise, noise, cv::Size(0, 0), sigma);
    cv::normalize(noise, noise, 0, 1, cv::NORM_MINMAX);
  }
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      double v;
      if (kind == 0) {
        v = 0.5 + 0.5 * std::sin(2 * M_PI * (x * ca + y * sa) / period);
      } else if (kind == 1) {
        auto u = static_cast<int>(std::floor((x * ca + y * sa) / period));
        auto s = static_cast<int>(std::floor((-x * sa + y * ca) / period));
        v = ((u + s) & 1) ? 1.0 : 0.0;
      } else {
        v = noise.at<float>(y, x);
      }
      cv::Vec3b& p = t.at<cv::Vec3b>(y, x);
      for (int c = 0; c < 3; ++c) p[c] = cv::saturate_cast<uchar>(c0[c] * (1 - v) + c1[c] * v);
    }
  }
  return t;
}

void paste_texture(cv::Mat& img, Rng& rng) {
  int w = static_cast<int>(rng.integer(img.cols / 6, img.cols / 2));
  int h = static_cast<int>(rng.integer(img.rows / 6, img.rows / 2));
  int x = static_cast<int>(rng.integer(0, img.cols - w)),
      y = static_cast<int>(rng.integer(0, img.rows - h));
  cv::Mat tex = texture(h, w, rng);
  cv::Mat mask = cv::Mat::zeros(h, w, CV_8U);
  if (rng.coin()) {
    cv::ellipse(mask, cv::Point(w / 2, h / 2), cv::Size(w / 2, h / 2), 0, 0, 360, 255, -1,
                cv::LINE_AA);
  } else {
    mask.setTo(255);
  }
  tex.copyTo(img(cv::Rect(x, y, w, h)), mask);
}

void draw_shape(cv::Mat& img, Rng& rng) {
  const int W = img.cols, H = img.rows;
  cv::Scalar color = random_color(rng);
  int thickness = rng.coin(0.5) ? -1 : static_cast<int>(rng.integer(1, 4));
  // y before x here and below: the order these generators have always drawn points in.
  const int cy = static_cast<int>(rng.integer(0, H - 1));
  const cv::Point c(static_cast<int>(rng.integer(0, W - 1)), cy);
  int size = static_cast<int>(rng.integer(std::max(3, W / 20), std::max(4, W / 4)));
  switch (rng.integer(0, 4)) {
    case 0:
      cv::rectangle(img, c, c + cv::Point(size, static_cast<int>(size * rng.uniform(0.3, 1.5))),
                    color, thickness, cv::LINE_AA);
      break;
    case 1:
      cv::circle(img, c, size / 2, color, thickness, cv::LINE_AA);
      break;
    case 2: {
      const double angle = rng.uniform(0, 180);
      const cv::Size axes(size / 2, static_cast<int>(size * rng.uniform(0.1, 0.5)));
      cv::ellipse(img, c, axes, angle, 0, 360, color, thickness, cv::LINE_AA);
      break;
    }
    case 3: {
      std::vector<cv::Point> pts;
      int n = static_cast<int>(rng.integer(3, 6));
      for (int i = 0; i < n; ++i) {
        const int dy = static_cast<int>(rng.integer(-size, size));
        pts.emplace_back(c.x + static_cast<int>(rng.integer(-size, size)), c.y + dy);
      }
      if (thickness < 0)
        cv::fillPoly(img, std::vector<std::vector<cv::Point>>{pts}, color, cv::LINE_AA);
      else
        cv::polylines(img, pts, true, color, thickness, cv::LINE_AA);
      break;
    }
    default: {
      const int width = static_cast<int>(rng.integer(1, 3));
      const int ey = static_cast<int>(rng.integer(0, H - 1));
      const cv::Point end(static_cast<int>(rng.integer(0, W - 1)), ey);
      cv::line(img, c, end, color, width, cv::LINE_AA);
    }
  }
}

void draw_text(cv::Mat& img, Rng& rng) {
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  static const int kFonts[] = {cv::FONT_HERSHEY_SIMPLEX, cv::FONT_HERSHEY_PLAIN,
                               cv::FONT_HERSHEY_DUPLEX,  cv::FONT_HERSHEY_COMPLEX,
                               cv::FONT_HERSHEY_TRIPLEX, cv::FONT_HERSHEY_SCRIPT_SIMPLEX};
  std::string s;
  int len = static_cast<int>(rng.integer(2, 8));
  for (int i = 0; i < len; ++i) s += kChars[rng.integer(0, sizeof(kChars) - 2)];
  int font = kFonts[rng.integer(0, 5)];
  double scale = rng.uniform(0.3, 1.4) * img.cols / 128.0;
  const int oy = static_cast<int>(rng.integer(8, img.rows + 4));
  const cv::Point org(static_cast<int>(rng.integer(-img.cols / 8, img.cols - 8)), oy);
  const int thickness = rng.coin(0.7) ? 1 : 2;
  cv::putText(img, s, org, font, scale, random_color(rng), thickness, cv::LINE_AA);
}

}  // namespace

at::Tensor render_synthetic_image(int64_t height, int64_t width, uint64_t seed) {
  Rng rng = Rng::from(seed, 0x5EED1A6E);
  cv::Mat img(static_cast<int>(height), static_cast<int>(width), CV_8UC3);
  gradient_background(img, rng);
  int textures = static_cast<int>(rng.integer(1, 3));
  for (int i = 0; i < textures; ++i) paste_texture(img, rng);
  int shapes = static_cast<int>(rng.integer(6, 16));
  for (int i = 0; i < shapes; ++i) draw_shape(img, rng);
  int texts = static_cast<int>(rng.integer(1, 4));
  for (int i = 0; i < texts; ++i) draw_text(img, rng);

  cv::Mat f;
  img.convertTo(f, CV_32FC3, 1.0 / 255);
  double blur = rng.uniform(0.0, 0.6);
  if (blur > 0.25) cv::GaussianBlur(f, f, cv::Size(0, 0), blur);
  double noise = rng.uniform(0.0, 0.01);
  for (int y = 0; y < f.rows; ++y) {
    auto* row = f.ptr<cv::Vec3f>(y);
    for (int x = 0; x < f.cols; ++x)
      for (int c = 0; c < 3; ++c) {
        // Approximately normal noise from a sum of uniforms (portable across compilers).
        double n = rng.sum_of_three() - 1.5;
        row[x][c] = std::min(1.0f, std::max(0.0f, static_cast<float>(row[x][c] + noise * 2 * n)));
      }
  }
  auto t = torch::from_blob(f.data, {f.rows, f.cols, 3}, torch::kFloat32).clone();
  // OpenCV's channel order is irrelevant for random colours; keep tensor order RGB as rendered.
  return t.permute({2, 0, 1}).contiguous();
}

}  // namespace igb::data
