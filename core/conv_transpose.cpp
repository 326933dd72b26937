#include "core/conv_transpose.h"

#include <torch/csrc/jit/frontend/tracer.h>

#include "core/tensor_util.h"

namespace igb {

SubpixelConv subpixel_conv(const at::Tensor& weight, const at::Tensor& bias, int64_t s,
                           at::IntArrayRef padding, at::IntArrayRef output_padding, int64_t h,
                           int64_t w) {
  const int64_t py = padding[0], px = padding.size() > 1 ? padding[1] : padding[0];
  const int64_t oy = output_padding[0],
                ox = output_padding.size() > 1 ? output_padding[1] : output_padding[0];
  const int64_t cin = weight.size(0), cout = weight.size(1), kh = weight.size(2),
                kw = weight.size(3);
  const int64_t th = (kh + s - 1) / s, tw = (kw + s - 1) / s;  // taps per phase
  SubpixelConv c;
  c.crop_y = py;
  c.crop_x = px;
  c.out_h = (h - 1) * s - 2 * py + kh + oy;
  c.out_w = (w - 1) * s - 2 * px + kw + ox;
  // Sub-kernels: k = t·s + r, so pad taps to T·s, split (t, r), flip t, move r to the channels.
  auto wpad = torch::constant_pad_nd(weight, {0, tw * s - kw, 0, th * s - kh});
  c.weight = wpad.reshape({cin, cout, th, s, tw, s})
                 .permute({1, 3, 5, 0, 2, 4})  // cout, ry, rx, cin, ty, tx
                 .flip({4, 5})
                 .reshape({cout * s * s, cin, th, tw});
  if (bias.defined()) c.bias = bias.repeat_interleave(s * s);
  // Full (uncropped) output row z = q·s + r needs q up to ceil((out + pad) / s) - 1.
  const int64_t need_h = (c.out_h + py + s - 1) / s, need_w = (c.out_w + px + s - 1) / s;
  const int64_t extra_h = std::max<int64_t>(0, need_h - (h + th - 1));
  const int64_t extra_w = std::max<int64_t>(0, need_w - (w + tw - 1));
  c.pad = {tw - 1, tw - 1 + extra_w, th - 1, th - 1 + extra_h};
  return c;
}

at::Tensor conv_transpose2d_subpixel(const at::Tensor& x, const at::Tensor& weight,
                                     const at::Tensor& bias, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef output_padding) {
  const int64_t sy = stride[0], sx = stride.size() > 1 ? stride[1] : stride[0];
  if (sy != sx) return torch::conv_transpose2d(x, weight, bias, stride, padding, output_padding);
  const auto c = subpixel_conv(weight, bias, sy, padding, output_padding, x.size(2), x.size(3));
  auto full =
      fast_pixel_shuffle(torch::conv2d(torch::constant_pad_nd(x, c.pad), c.weight, c.bias), sy);
  return full.narrow(2, c.crop_y, c.out_h).narrow(3, c.crop_x, c.out_w);
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
