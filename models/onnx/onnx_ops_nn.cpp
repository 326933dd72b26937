// Convolutions, pools, normalizations and dropout as LibTorch operators.
#include <ATen/Functions.h>

#include <limits>

#include "models/onnx/onnx_ops.h"

namespace igb::models::onnx_import {

namespace {

using Tensors = std::vector<at::Tensor>;

std::vector<int64_t> spatial_sizes(const at::Tensor& x) {
  return {x.sizes().begin() + 2, x.sizes().end()};
}

std::vector<int64_t> begins(const std::vector<int64_t>& pads) {
  return {pads.begin(), pads.begin() + static_cast<long>(pads.size() / 2)};
}

/// The sample's spatial rank (input 0), refused below 1.
size_t spatial_rank(const NodeView& n) {
  const auto& x = n.sample(0);
  if (!x.defined() || x.dim() < 3)
    n.refuse("needs an input of [N, C, ...] with spatial dimensions, not " +
             std::to_string(x.defined() ? x.dim() : 0) + "-D");
  return static_cast<size_t>(x.dim() - 2);
}

OpRun build_conv(const NodeView& n) {
  const size_t spatial = spatial_rank(n);
  const auto& w = n.sample(1);
  if (!w.defined() || w.dim() != static_cast<int64_t>(spatial) + 2)
    n.refuse("its weight is not " + std::to_string(spatial + 2) + "-D");
  const Window win = read_window(n, spatial, {w.sizes().begin() + 2, w.sizes().end()});
  const int64_t groups = n.i("group", 1);
  return [win, groups](const Tensors& in) -> Tensors {
    const auto pads = win.pads_for(spatial_sizes(in[0]));
    const at::Tensor bias = in.size() > 2 ? in[2] : at::Tensor();
    if (Window::symmetric(pads))
      return {at::convolution(in[0], in[1], bias, win.strides, begins(pads), win.dilations, false,
                              std::vector<int64_t>(win.strides.size(), 0), groups)};
    return {at::convolution(pad_spatial(in[0], pads, 0.0), in[1], bias, win.strides,
                            std::vector<int64_t>(win.strides.size(), 0), win.dilations, false,
                            std::vector<int64_t>(win.strides.size(), 0), groups)};
  };
}

/// ConvTranspose: the full transposed convolution (no pads), its output padded at the ends by
/// output_padding and cut by the pads (given, or derived from output_shape or auto_pad).
OpRun build_conv_transpose(const NodeView& n) {
  const size_t spatial = spatial_rank(n);
  const auto& w = n.sample(1);
  if (!w.defined() || w.dim() != static_cast<int64_t>(spatial) + 2)
    n.refuse("its weight is not " + std::to_string(spatial + 2) + "-D");
  Window win = read_window(n, spatial, {w.sizes().begin() + 2, w.sizes().end()});
  const int64_t groups = n.i("group", 1);
  auto out_pad = n.ints("output_padding");
  if (out_pad.empty()) out_pad.assign(spatial, 0);
  auto out_shape = n.ints("output_shape");
  if (out_pad.size() != spatial) n.refuse("output_padding does not have one value a dimension");
  if (!out_shape.empty() && out_shape.size() != spatial) {
    if (out_shape.size() == spatial + 2)
      out_shape.erase(out_shape.begin(), out_shape.begin() + 2);
    else
      n.refuse("output_shape does not have one value a dimension");
  }
  return [win, groups, out_pad, out_shape](const Tensors& in) -> Tensors {
    const auto sizes = spatial_sizes(in[0]);
    const size_t d = sizes.size();
    std::vector<int64_t> pads = win.pads;
    if (pads.empty()) pads.assign(2 * d, 0);
    const bool same = win.auto_pad == "SAME_UPPER" || win.auto_pad == "SAME_LOWER";
    if (!out_shape.empty() || same) {
      for (size_t i = 0; i < d; ++i) {
        const int64_t full = win.strides[i] * (sizes[i] - 1) + out_pad[i] +
                             (win.kernel[i] - 1) * win.dilations[i] + 1;
        const int64_t want = out_shape.empty() ? sizes[i] * win.strides[i] : out_shape[i];
        // A negative total pads the output at the ends, as ONNX's reference computes it (Python's
        // floor division).
        const int64_t total = full - want;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        const bool upper = win.auto_pad == "SAME_UPPER";
        pads[i] = upper ? half : total - half;
        pads[i + d] = upper ? total - half : half;
      }
    }
    const std::vector<int64_t> zeros(d, 0);
    const at::Tensor bias = in.size() > 2 ? in[2] : at::Tensor();
    bool direct = Window::symmetric(pads);
    for (size_t i = 0; i < d; ++i)
      direct = direct && pads[i] >= 0 && out_pad[i] < std::max(win.strides[i], win.dilations[i]);
    if (direct)
      return {at::convolution(in[0], in[1], bias, win.strides, begins(pads), win.dilations, true,
                              out_pad, groups)};
    // The full transposed convolution, then cut (or extended with zeros) at each end: the pads at
    // the start, output_padding less the pads at the end.
    at::Tensor y =
        at::convolution(in[0], in[1], {}, win.strides, zeros, win.dilations, true, zeros, groups);
    std::vector<int64_t> torch_pads;
    for (size_t i = d; i-- > 0;) {
      torch_pads.push_back(-pads[i]);
      torch_pads.push_back(out_pad[i] - pads[i + d]);
    }
    y = at::constant_pad_nd(y, torch_pads, 0.0);
    if (bias.defined()) {
      std::vector<int64_t> shape(y.dim(), 1);
      shape[1] = -1;
      y = y + bias.reshape(shape);
    }
    return {y};
  };
}

at::Tensor max_pool(const at::Tensor& x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
                    at::IntArrayRef d, bool ceil) {
  switch (x.dim()) {
    case 3:
      return at::max_pool1d(x, k, s, p, d, ceil);
    case 4:
      return at::max_pool2d(x, k, s, p, d, ceil);
    default:
      return at::max_pool3d(x, k, s, p, d, ceil);
  }
}

at::Tensor avg_pool(const at::Tensor& x, at::IntArrayRef k, at::IntArrayRef s, at::IntArrayRef p,
                    bool ceil, bool include_pad, c10::optional<int64_t> divisor = c10::nullopt) {
  switch (x.dim()) {
    case 3:
      if (!divisor) return at::avg_pool1d(x, k, s, p, ceil, include_pad);
      return at::avg_pool2d(x.unsqueeze(2), {1, k[0]}, {1, s[0]}, {0, p[0]}, ceil, include_pad,
                            divisor)
          .squeeze(2);
    case 4:
      return at::avg_pool2d(x, k, s, p, ceil, include_pad, divisor);
    default:
      return at::avg_pool3d(x, k, s, p, ceil, include_pad, divisor);
  }
}

/// Whether LibTorch's pools take these pads as they are: the same at both ends and at most half
/// the kernel.
bool torch_pads(const std::vector<int64_t>& pads, const std::vector<int64_t>& kernel) {
  if (!Window::symmetric(pads)) return false;
  for (size_t i = 0; i < kernel.size(); ++i)
    if (pads[i] * 2 > kernel[i]) return false;
  return true;
}

OpRun build_max_pool(const NodeView& n) {
  const size_t spatial = spatial_rank(n);
  if (spatial > 3) n.refuse("pools of 1 to 3 spatial dimensions only");
  if (n.node().outputs.size() > 1 && !n.node().outputs[1].empty())
    n.refuse("the Indices output is not supported");
  const Window win = read_window(n, spatial, {});
  const bool ceil = n.i("ceil_mode", 0) != 0;
  return [win, ceil](const Tensors& in) -> Tensors {
    // LibTorch pools floating types only; integers are exact in double up to 2^53.
    const auto type = in[0].scalar_type();
    const auto x = at::isFloatingType(type) ? in[0] : in[0].to(at::kDouble);
    const auto pads = win.pads_for(spatial_sizes(x));
    at::Tensor y;
    if (torch_pads(pads, win.kernel))
      y = max_pool(x, win.kernel, win.strides, begins(pads), win.dilations, ceil);
    else
      y = max_pool(pad_spatial(x, pads, -std::numeric_limits<double>::infinity()), win.kernel,
                   win.strides, std::vector<int64_t>(win.kernel.size(), 0), win.dilations, ceil);
    return {y.scalar_type() == type ? y : y.to(type)};
  };
}

OpRun build_avg_pool(const NodeView& n) {
  const size_t spatial = spatial_rank(n);
  if (spatial > 3) n.refuse("pools of 1 to 3 spatial dimensions only");
  const Window win = read_window(n, spatial, {});
  for (int64_t d : win.dilations)
    if (d != 1) n.refuse("dilated average pools are not supported");
  const bool ceil = n.i("ceil_mode", 0) != 0;
  const bool include_pad = n.i("count_include_pad", 0) != 0;
  return [win, ceil, include_pad](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const auto pads = win.pads_for(spatial_sizes(x));
    const std::vector<int64_t> none(win.kernel.size(), 0);
    if (torch_pads(pads, win.kernel))
      return {avg_pool(x, win.kernel, win.strides, begins(pads), ceil, include_pad)};
    const auto padded = pad_spatial(x, pads, 0.0);
    if (include_pad) return {avg_pool(padded, win.kernel, win.strides, none, ceil, true)};
    // Only the input's own elements count: the sum of each window over the number of them.
    const auto sums = avg_pool(padded, win.kernel, win.strides, none, ceil, true, 1);
    std::vector<int64_t> mask_shape(x.dim(), 1);
    for (int64_t i = 2; i < x.dim(); ++i) mask_shape[i] = x.size(i);
    const auto mask = pad_spatial(at::ones(mask_shape, x.options()), pads, 0.0);
    const auto counts = avg_pool(mask, win.kernel, win.strides, none, ceil, true, 1);
    return {sums / counts};
  };
}

std::vector<int64_t> spatial_dims(const at::Tensor& x) {
  std::vector<int64_t> dims;
  for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
  return dims;
}

OpRun build_global_pool(const NodeView& n, bool max) {
  spatial_rank(n);
  return [max](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    if (x.dim() == 4)
      return {max ? std::get<0>(at::adaptive_max_pool2d(x, {1, 1}))
                  : at::adaptive_avg_pool2d(x, {1, 1})};
    return {max ? x.amax(spatial_dims(x), true) : x.mean(spatial_dims(x), true)};
  };
}

OpRun build_batch_norm(const NodeView& n) {
  if (n.opset() < 9 && n.i("spatial", 1) != 1)
    n.refuse("spatial=0 (statistics per element) is not supported");
  const double eps = n.f("epsilon", 1e-5f);
  const double momentum = n.f("momentum", 0.9f);
  const bool training = n.opset() >= 14 && n.i("training_mode", 0) != 0;
  return [eps, momentum, training](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    if (!training)
      return {at::batch_norm(x, in[1], in[2], in[3], in[4], false, 1.0 - momentum, eps, false)};
    std::vector<int64_t> dims{0};
    for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
    const auto mean = x.mean(dims);
    const auto var = x.var(dims, false);
    const auto y = at::batch_norm(x, in[1], in[2], mean, var, false, 0.0, eps, false);
    return {y, in[3] * momentum + mean * (1.0 - momentum),
            in[4] * momentum + var * (1.0 - momentum)};
  };
}

OpRun build_instance_norm(const NodeView& n) {
  const double eps = n.f("epsilon", 1e-5f);
  return [eps](const Tensors& in) -> Tensors {
    return {at::instance_norm(in[0], in[1], in[2], {}, {}, true, 0.0, eps, false)};
  };
}

OpRun build_layer_norm(const NodeView& n) {
  const int64_t axis = n.i("axis", -1);
  const double eps = n.f("epsilon", 1e-5f);
  return [axis, eps](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    std::vector<int64_t> dims;
    for (int64_t i = a; i < x.dim(); ++i) dims.push_back(i);
    const auto mean = x.mean(dims, true);
    const auto centered = x - mean;
    const auto inv_std = (centered.square().mean(dims, true) + eps).rsqrt();
    at::Tensor y = centered * inv_std * in[1];
    if (in.size() > 2 && in[2].defined()) y = y + in[2];
    return {y, mean, inv_std};
  };
}

OpRun build_lrn(const NodeView& n) {
  const int64_t size = n.i("size", 0);
  if (size < 1) n.refuse("attribute 'size' must be at least 1");
  const double alpha = n.f("alpha", 1e-4f);
  const double beta = n.f("beta", 0.75f);
  const double bias = n.f("bias", 1.0f);
  return [size, alpha, beta, bias](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t before = (size - 1) / 2;
    const int64_t after = size - 1 - before;
    auto sq = x.square();
    std::vector<int64_t> pad(2 * (x.dim() - 1), 0);
    pad[pad.size() - 2] = before;
    pad[pad.size() - 1] = after;
    const auto sums = at::constant_pad_nd(sq, pad).unfold(1, size, 1).sum(-1);
    return {x / (sums * (alpha / static_cast<double>(size)) + bias).pow(beta)};
  };
}

OpRun build_dropout(const NodeView& n) {
  bool training = false;
  if (n.opset() >= 12 && n.has_input(2)) {
    const auto& t = n.constant(2);
    if (!t.defined()) n.refuse("training_mode must be a constant");
    training = t.numel() > 0 && t.reshape({-1})[0].item<bool>();
  }
  double ratio = n.opset() >= 12 ? 0.5 : n.f("ratio", 0.5f);
  if (n.opset() >= 12 && n.has_input(1) && n.constant(1).defined())
    ratio = n.constant(1).reshape({}).item<double>();
  if (training && ratio > 0.0)
    n.refuse("in training mode (training_mode true) with its mask read: the mask is random");
  return [](const Tensors& in) -> Tensors {
    return {in[0], at::ones(in[0].sizes(), in[0].options().dtype(at::kBool))};
  };
}

}  // namespace

Window read_window(const NodeView& n, size_t spatial, std::vector<int64_t> kernel) {
  Window w;
  w.auto_pad = n.s("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID")
    n.refuse("auto_pad '" + w.auto_pad + "' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID");
  const auto given = n.ints("kernel_shape");
  if (!given.empty()) kernel = given;
  if (kernel.size() != spatial) n.refuse("kernel_shape does not have one value a dimension");
  w.kernel = kernel;
  w.strides = n.ints("strides");
  if (w.strides.empty()) w.strides.assign(spatial, 1);
  w.dilations = n.ints("dilations");
  if (w.dilations.empty()) w.dilations.assign(spatial, 1);
  w.pads = n.ints("pads");
  if (w.pads.empty()) w.pads.assign(2 * spatial, 0);
  if (w.strides.size() != spatial || w.dilations.size() != spatial || w.pads.size() != 2 * spatial)
    n.refuse("strides, dilations and pads do not fit its " + std::to_string(spatial) +
             " spatial dimensions");
  for (size_t i = 0; i < spatial; ++i)
    if (w.kernel[i] < 1 || w.strides[i] < 1 || w.dilations[i] < 1 || w.pads[i] < 0 ||
        w.pads[i + spatial] < 0)
      n.refuse("kernel, strides and dilations must be positive and pads not negative");
  return w;
}

std::vector<int64_t> Window::pads_for(at::IntArrayRef in) const {
  const size_t d = kernel.size();
  if (auto_pad == "VALID") return std::vector<int64_t>(2 * d, 0);
  if (auto_pad == "NOTSET") return pads;
  std::vector<int64_t> out(2 * d, 0);
  for (size_t i = 0; i < d; ++i) {
    const int64_t o = (in[i] + strides[i] - 1) / strides[i];
    const int64_t total =
        std::max<int64_t>((o - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - in[i], 0);
    const bool upper = auto_pad == "SAME_UPPER";
    out[i] = upper ? total / 2 : total - total / 2;
    out[i + d] = total - out[i];
  }
  return out;
}

bool Window::symmetric(const std::vector<int64_t>& pads) {
  const size_t d = pads.size() / 2;
  for (size_t i = 0; i < d; ++i)
    if (pads[i] != pads[i + d]) return false;
  return true;
}

at::Tensor pad_spatial(const at::Tensor& x, const std::vector<int64_t>& pads, double value) {
  const size_t d = pads.size() / 2;
  std::vector<int64_t> torch_pads;
  for (size_t i = d; i-- > 0;) {
    torch_pads.push_back(pads[i]);
    torch_pads.push_back(pads[i + d]);
  }
  return at::constant_pad_nd(x, torch_pads, value);
}

void add_nn_ops(std::map<std::string, OpBuild>& t) {
  t["Conv"] = build_conv;
  t["ConvTranspose"] = build_conv_transpose;
  t["MaxPool"] = build_max_pool;
  t["AveragePool"] = build_avg_pool;
  t["GlobalAveragePool"] = [](const NodeView& n) { return build_global_pool(n, false); };
  t["GlobalMaxPool"] = [](const NodeView& n) { return build_global_pool(n, true); };
  t["BatchNormalization"] = build_batch_norm;
  t["InstanceNormalization"] = build_instance_norm;
  t["LayerNormalization"] = build_layer_norm;
  t["LRN"] = build_lrn;
  t["Dropout"] = build_dropout;
}

}  // namespace igb::models::onnx_import
