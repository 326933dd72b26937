#include "core/conv_transpose.h"

#include <torch/csrc/jit/frontend/tracer.h>

#include "core/tensor_util.h"

namespace igb {

at::Tensor conv_transpose2d_subpixel(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef output_padding) {
  const int64_t sy = stride[0], sx = stride.size() > 1 ? stride[1] : stride[0];
  const int64_t py = padding[0], px = padding.size() > 1 ? padding[1] : padding[0];
  const int64_t oy = output_padding[0],
                ox = output_padding.size() > 1 ? output_padding[1] : output_padding[0];
  const int64_t cin = weight.size(0), cout = weight.size(1), kh = weight.size(2),
                kw = weight.size(3);
  const int64_t h = x.size(2), w = x.size(3);
  const int64_t th = (kh + sy - 1) / sy, tw = (kw + sx - 1) / sx;  // taps per phase
  const int64_t out_h = (h - 1) * sy - 2 * py + kh + oy, out_w = (w - 1) * sx - 2 * px + kw + ox;
  if (sy != sx) {
    return torch::conv_transpose2d(x, weight, bias, stride, padding, output_padding);
  }
  const int64_t s = sy;
  // Sub-kernels: k = t·s + r, so pad taps to T·s, split (t, r), flip t, move r to the channels.
  auto wpad = torch::constant_pad_nd(weight, {0, tw * s - kw, 0, th * s - kh});
  auto g = wpad.reshape({cin, cout, th, s, tw, s})
               .permute({1, 3, 5, 0, 2, 4})  // cout, ry, rx, cin, ty, tx
               .flip({4, 5})
               .reshape({cout * s * s, cin, th, tw});
  at::Tensor b;
  if (bias.defined()) b = bias.repeat_interleave(s * s);
  // Full (uncropped) output row z = q·s + r needs q up to ceil((out + pad) / s) - 1.
  const int64_t need_h = (out_h + py + s - 1) / s, need_w = (out_w + px + s - 1) / s;
  const int64_t extra_h = std::max<int64_t>(0, need_h - (h + th - 1));
  const int64_t extra_w = std::max<int64_t>(0, need_w - (w + tw - 1));
  auto xp = torch::constant_pad_nd(x, {tw - 1, tw - 1 + extra_w, th - 1, th - 1 + extra_h});
  auto full = fast_pixel_shuffle(torch::conv2d(xp, g, b), s);
  return full.narrow(2, py, out_h).narrow(3, px, out_w);
}

at::Tensor fast_conv_transpose2d(torch::nn::ConvTranspose2dImpl& layer, const at::Tensor& x) {
  const auto& o = layer.options;
  const bool plain = o.groups() == 1 && o.dilation()->at(0) == 1 && o.dilation()->at(1) == 1 &&
                     c10::get_if<torch::ExpandingArray<2>>(&o.padding()) != nullptr && x.dim() == 4;
  if (!plain || torch::jit::tracer::isTracing()) return layer.forward(x);
  const auto* pad = c10::get_if<torch::ExpandingArray<2>>(&o.padding());
  return conv_transpose2d_subpixel(x, layer.weight, layer.bias, *o.stride(), **pad,
                                   *o.output_padding());
}

}  // namespace igb
