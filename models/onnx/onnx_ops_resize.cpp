// Resize (opsets 10, 11, 13, 18) and Upsample (7, 9): per axis, each output index reads one to
// four input indices with weights, as ONNX's reference computes them; the common cases of image
// models run as LibTorch's own upsampling.
#include <ATen/Functions.h>

#include <cmath>

#include "models/onnx/onnx_ops.h"

namespace igb::models::onnx_import {

namespace {

using Tensors = std::vector<at::Tensor>;

struct ResizeSpec {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;
  std::string keep_aspect = "stretch";
  std::vector<int64_t> axes;
  /// Input positions of roi, scales and sizes (-1: the op has none).
  int roi = -1, scales = -1, sizes = -1;
  /// Scales given as an attribute (Upsample 7).
  std::vector<float> scale_attr;
};

/// The input indices and weights one output index reads along one axis.
struct Taps {
  std::vector<std::vector<int64_t>> index;  // [tap][output]
  std::vector<std::vector<double>> weight;  // [tap][output]
  std::vector<bool> outside;                // tf_crop_and_resize: output is extrapolation_value
};

double source_coordinate(const ResizeSpec& s, int64_t x, int64_t n, double scale, double roi_lo,
                         double roi_hi) {
  const double out_width = scale * static_cast<double>(n);
  const double xd = static_cast<double>(x);
  if (s.coord == "align_corners")
    return out_width == 1 ? 0.0 : xd * static_cast<double>(n - 1) / (out_width - 1);
  if (s.coord == "asymmetric") return xd / scale;
  if (s.coord == "pytorch_half_pixel") return out_width == 1 ? -0.5 : (xd + 0.5) / scale - 0.5;
  if (s.coord == "tf_half_pixel_for_nn") return (xd + 0.5) / scale;
  if (s.coord == "tf_crop_and_resize") {
    const double span = (roi_hi - roi_lo) * static_cast<double>(n - 1);
    const double x_ori = out_width == 1 ? span / 2 : xd * span / (out_width - 1);
    return x_ori + roi_lo * static_cast<double>(n - 1);
  }
  return (xd + 0.5) / scale - 0.5;  // half_pixel
}

std::array<double, 4> cubic_weights(double r, double a) {
  const double s = 1 - r;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
          ((a + 2) * r - (a + 3)) * r * r + 1, ((a + 2) * s - (a + 3)) * s * s + 1,
          ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

Taps axis_taps(const ResizeSpec& s, int64_t n, int64_t m, double scale, double roi_lo,
               double roi_hi, bool downsampling) {
  const size_t count = s.mode == "nearest" ? 1 : s.mode == "linear" ? 2 : 4;
  Taps t;
  t.index.assign(count, std::vector<int64_t>(m, 0));
  t.weight.assign(count, std::vector<double>(m, 0.0));
  t.outside.assign(m, false);
  for (int64_t x = 0; x < m; ++x) {
    const double xo = source_coordinate(s, x, n, scale, roi_lo, roi_hi);
    if (s.coord == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(n - 1))) {
      t.outside[x] = true;
      continue;
    }
    const double fl = std::floor(xo);
    const double r = xo - fl;
    const bool whole = r == 0.0;
    if (count == 1) {
      double pick = xo;
      if (!whole) {
        if (s.nearest == "floor" || (s.nearest == "simple" && !downsampling))
          pick = fl;
        else if (s.nearest == "ceil" || s.nearest == "simple")
          pick = fl + 1;
        else if (s.nearest == "round_prefer_ceil")
          pick = r < 0.5 ? fl : fl + 1;
        else
          pick = r <= 0.5 ? fl : fl + 1;
      }
      t.index[0][x] = std::clamp<int64_t>(static_cast<int64_t>(pick), 0, n - 1);
      t.weight[0][x] = 1.0;
      continue;
    }
    // Whole coordinates read one input index (the reference's ratio 1 on the left neighbour).
    const int64_t base = static_cast<int64_t>(fl) - (whole ? 1 : 0);
    const double ratio = whole ? 1.0 : r;
    std::array<double, 4> w{};
    std::array<int64_t, 4> idx{};
    if (count == 2) {
      w = {1 - ratio, ratio, 0, 0};
      idx = {base, base + 1, 0, 0};
    } else {
      w = cubic_weights(ratio, s.cubic_a);
      idx = {base - 1, base, base + 1, base + 2};
    }
    if (s.exclude_outside) {
      double sum = 0;
      for (size_t k = 0; k < count; ++k) {
        if (idx[k] < 0 || idx[k] >= n) w[k] = 0;
        sum += w[k];
      }
      for (size_t k = 0; k < count; ++k) w[k] = sum != 0 ? w[k] / sum : 0;
    }
    for (size_t k = 0; k < count; ++k) {
      t.index[k][x] = std::clamp<int64_t>(idx[k], 0, n - 1);
      t.weight[k][x] = w[k];
    }
  }
  return t;
}

at::Tensor resize_axis(const at::Tensor& x, int64_t axis, const Taps& t, double extrapolation) {
  const int64_t m = static_cast<int64_t>(t.outside.size());
  std::vector<int64_t> shape(x.dim(), 1);
  shape[axis] = m;
  at::Tensor y;
  for (size_t k = 0; k < t.index.size(); ++k) {
    const auto part = x.index_select(axis, at::tensor(t.index[k], at::kLong));
    if (t.index.size() == 1) {
      y = part;
      break;
    }
    const auto w = at::tensor(t.weight[k], at::kDouble).to(x.scalar_type()).reshape(shape);
    y = y.defined() ? y + part * w : part * w;
  }
  bool any_outside = false;
  for (bool o : t.outside) any_outside = any_outside || o;
  if (any_outside) {
    const auto mask = at::tensor(std::vector<uint8_t>(t.outside.begin(), t.outside.end()))
                          .to(at::kBool)
                          .reshape(shape);
    y = at::where(mask, at::scalar_tensor(extrapolation, y.options()), y);
  }
  return y;
}

/// LibTorch's upsampling where it computes exactly what ONNX asks: 4-D, N and C kept, nearest
/// asymmetric floor at whole upscales, or linear half-pixel.
at::Tensor torch_resize(const at::Tensor& x, const ResizeSpec& s, const std::vector<int64_t>& out,
                        const std::vector<double>& scales) {
  if (x.dim() != 4 || out[0] != x.size(0) || out[1] != x.size(1) ||
      !at::isFloatingType(x.scalar_type()))
    return {};
  const bool whole_up = scales[2] >= 1 && scales[3] >= 1 && std::floor(scales[2]) == scales[2] &&
                        std::floor(scales[3]) == scales[3];
  const std::vector<int64_t> hw{out[2], out[3]};
  if (s.mode == "nearest" && s.coord == "asymmetric" && whole_up &&
      (s.nearest == "floor" || s.nearest == "simple"))
    return at::upsample_nearest2d(x, hw, scales[2], scales[3]);
  if (s.mode == "linear" && (s.coord == "half_pixel" || s.coord == "pytorch_half_pixel") &&
      out[2] > 1 && out[3] > 1)
    return at::upsample_bilinear2d(x, hw, false, scales[2], scales[3]);
  return {};
}

at::Tensor resize(const at::Tensor& x, const ResizeSpec& s, const Tensors& in) {
  const int64_t r = x.dim();
  std::vector<int64_t> axes = s.axes;
  for (auto& a : axes) a = a < 0 ? a + r : a;
  if (axes.empty())
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  const size_t k = axes.size();
  auto input = [&](int i) {
    return i >= 0 && static_cast<size_t>(i) < in.size() ? in[i] : at::Tensor();
  };
  std::vector<double> roi_lo(r, 0.0), roi_hi(r, 1.0);
  const auto roi = input(s.roi);
  if (roi.defined() && roi.numel() == static_cast<int64_t>(2 * k)) {
    const auto v = roi.to(at::kDouble).contiguous();
    for (size_t i = 0; i < k; ++i) {
      roi_lo[axes[i]] = v[i].item<double>();
      roi_hi[axes[i]] = v[i + k].item<double>();
    }
  }
  std::vector<double> scales(r, 1.0);
  std::vector<int64_t> out = x.sizes().vec();
  const auto sizes = input(s.sizes);
  const auto scale_in = input(s.scales);
  if (sizes.defined() && sizes.numel() > 0) {
    const auto v = to_ints(sizes);
    std::vector<double> ratio(k);
    for (size_t i = 0; i < k; ++i)
      ratio[i] = static_cast<double>(v[i]) / static_cast<double>(x.size(axes[i]));
    if (s.keep_aspect != "stretch") {
      const double pick = s.keep_aspect == "not_larger"
                              ? *std::min_element(ratio.begin(), ratio.end())
                              : *std::max_element(ratio.begin(), ratio.end());
      for (size_t i = 0; i < k; ++i) {
        ratio[i] = pick;
        out[axes[i]] =
            static_cast<int64_t>(std::nearbyint(pick * static_cast<double>(x.size(axes[i]))));
      }
    } else {
      for (size_t i = 0; i < k; ++i) out[axes[i]] = v[i];
    }
    for (size_t i = 0; i < k; ++i) scales[axes[i]] = ratio[i];
  } else {
    std::vector<double> v;
    if (scale_in.defined()) {
      const auto t = scale_in.to(at::kDouble).contiguous();
      v.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    } else {
      v.assign(s.scale_attr.begin(), s.scale_attr.end());
    }
    if (v.size() != k) throw std::invalid_argument("scales");
    for (size_t i = 0; i < k; ++i) {
      scales[axes[i]] = v[i];
      const double span = s.coord == "tf_crop_and_resize" ? roi_hi[axes[i]] - roi_lo[axes[i]] : 1.0;
      out[axes[i]] =
          static_cast<int64_t>(std::floor(static_cast<double>(x.size(axes[i])) * span * v[i]));
    }
  }
  if (auto fast = torch_resize(x, s, out, scales); fast.defined()) return fast;
  const bool floating = at::isFloatingType(x.scalar_type());
  at::Tensor y = floating ? x : x.to(at::kFloat);
  for (int64_t a = r; a-- > 0;) {
    if (out[a] == x.size(a) && scales[a] == 1.0 && s.coord != "tf_crop_and_resize") continue;
    const Taps t = axis_taps(s, x.size(a), out[a], scales[a], roi_lo[a], roi_hi[a], scales[a] < 1);
    y = resize_axis(y, a, t, s.extrapolation);
  }
  return floating ? y : y.round().to(x.scalar_type());
}

OpRun build_resize(const NodeView& n) {
  ResizeSpec s;
  s.mode = n.s("mode", "nearest");
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic")
    n.refuse("mode '" + s.mode + "' is not nearest, linear or cubic");
  if (n.opset() < 11) {
    s.coord = "asymmetric";
    s.nearest = "simple";
    s.scales = 1;
    if (s.mode == "cubic") n.refuse("cubic resizing needs opset 11");
  } else {
    s.coord = n.s("coordinate_transformation_mode", "half_pixel");
    s.nearest = n.s("nearest_mode", "round_prefer_floor");
    s.cubic_a = n.f("cubic_coeff_a", -0.75f);
    s.exclude_outside = n.i("exclude_outside", 0) != 0;
    s.extrapolation = n.f("extrapolation_value", 0.0f);
    s.roi = 1;
    s.scales = 2;
    s.sizes = 3;
  }
  static const char* const kCoords[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoords), std::end(kCoords), s.coord) == std::end(kCoords))
    n.refuse("coordinate_transformation_mode '" + s.coord + "' is not one ONNX defines");
  static const char* const kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil",
                                         "simple"};
  if (std::find(std::begin(kNearest), std::end(kNearest), s.nearest) == std::end(kNearest))
    n.refuse("nearest_mode '" + s.nearest + "' is not one ONNX defines");
  if (n.opset() >= 18) {
    if (n.i("antialias", 0) != 0) n.refuse("antialias is not supported");
    s.axes = n.ints("axes");
    s.keep_aspect = n.s("keep_aspect_ratio_policy", "stretch");
    if (s.keep_aspect != "stretch" && s.keep_aspect != "not_larger" &&
        s.keep_aspect != "not_smaller")
      n.refuse("keep_aspect_ratio_policy '" + s.keep_aspect + "' is not one ONNX defines");
  }
  return [s](const Tensors& in) -> Tensors { return {resize(in[0], s, in)}; };
}

OpRun build_upsample(const NodeView& n) {
  if (n.opset() < 7)
    n.refuse("Upsample before opset 7 (width_scale, height_scale) is not supported");
  ResizeSpec s;
  s.mode = n.s("mode", "nearest");
  if (s.mode == "bilinear") s.mode = "linear";
  if (s.mode != "nearest" && s.mode != "linear")
    n.refuse("mode '" + s.mode + "' is not nearest or linear");
  s.coord = "asymmetric";
  s.nearest = "simple";
  if (n.opset() < 9)
    s.scale_attr = n.floats("scales");
  else
    s.scales = 1;
  return [s](const Tensors& in) -> Tensors { return {resize(in[0], s, in)}; };
}

}  // namespace

void add_resize_ops(std::map<std::string, OpBuild>& t) {
  t["Resize"] = build_resize;
  t["Upsample"] = build_upsample;
}

}  // namespace igb::models::onnx_import
