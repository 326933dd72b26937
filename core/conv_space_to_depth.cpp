#include "core/conv_space_to_depth.h"

#include <torch/csrc/jit/frontend/tracer.h>

#include "core/tensor_util.h"

namespace igb {

at::Tensor conv2d_space_to_depth(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, int64_t block) {
  const int64_t s = block;
  const int64_t out_c = weight.size(0), in_c = weight.size(1), kh = weight.size(2),
                kw = weight.size(3);
  TORCH_CHECK(x.dim() == 4 && in_c == x.size(1) && s >= 1 && x.size(2) >= kh && x.size(3) >= kw,
              "conv2d_space_to_depth: input ", x.sizes(), " does not fit weight ", weight.sizes());
  const int64_t out_h = x.size(2) - kh + 1, out_w = x.size(3) - kw + 1;
  // Output phase a reads input rows s·i + a + ky = s·(i + dy) + p: taps dy < th.
  const int64_t th = (kh + s - 2) / s + 1, tw = (kw + s - 2) / s + 1;
  // Phase (a, b)'s kernel: weight shifted down by a and right by b inside a th·s × tw·s window,
  // whose (dy, p) × (dx, q) taps become input channels (c, p, q), as pixel_unshuffle orders them.
  std::vector<at::Tensor> phases;
  for (int64_t a = 0; a < s; ++a)
    for (int64_t b = 0; b < s; ++b)
      phases.push_back(at::constant_pad_nd(weight, {b, tw * s - kw - b, a, th * s - kh - a})
                           .reshape({out_c, in_c, th, s, tw, s})
                           .permute({0, 1, 3, 5, 2, 4})
                           .reshape({out_c, in_c * s * s, th, tw}));
  const auto w = at::stack(phases, 1).reshape({out_c * s * s, in_c * s * s, th, tw});
  at::Tensor b;
  if (bias.defined()) b = bias.repeat_interleave(s * s);
  // Rows the cells must cover: (cells of output + taps − 1) · s, zero-padded or cut to that.
  const int64_t cells_h = (out_h + s - 1) / s, cells_w = (out_w + s - 1) / s;
  const int64_t need_h = (cells_h + th - 1) * s, need_w = (cells_w + tw - 1) * s;
  auto xs = at::constant_pad_nd(x, {0, need_w - x.size(3), 0, need_h - x.size(2)});
  auto y = fast_pixel_shuffle(at::conv2d(fast_pixel_unshuffle(xs, s), w, b), s);
  return y.narrow(2, 0, out_h).narrow(3, 0, out_w);
}

bool space_to_depth_pays(const torch::nn::Conv2dImpl& layer) {
  const auto& o = layer.options;
  const auto* pad = c10::get_if<torch::ExpandingArray<2>>(&o.padding());
  return pad != nullptr && o.groups() == 1 && (*o.stride())[0] == 1 && (*o.stride())[1] == 1 &&
         (*o.dilation())[0] == 1 && (*o.dilation())[1] == 1 &&
         c10::get_if<torch::enumtype::kZeros>(&o.padding_mode()) != nullptr &&
         layer.weight.size(0) <= 4 && layer.weight.size(2) >= 7 && layer.weight.size(3) >= 7;
}

at::Tensor fast_conv2d(torch::nn::Conv2dImpl& layer, const at::Tensor& x) {
  if (x.dim() != 4 || torch::jit::tracer::isTracing() || !space_to_depth_pays(layer))
    return layer.forward(x);
  const auto& pad = *c10::get_if<torch::ExpandingArray<2>>(&layer.options.padding());
  auto input = x;
  if ((*pad)[0] != 0 || (*pad)[1] != 0)
    input = at::constant_pad_nd(x, {(*pad)[1], (*pad)[1], (*pad)[0], (*pad)[0]});
  // Wrong channel counts and too small inputs get LibTorch's own message.
  if (input.size(1) != layer.weight.size(1) || input.size(2) < layer.weight.size(2) ||
      input.size(3) < layer.weight.size(3))
    return layer.forward(x);
  return conv2d_space_to_depth(input, layer.weight, layer.bias, 2);
}

}  // namespace igb
