#include "runtime/qnnpack_layer.h"

#include <ATen/Context.h>
#include <ATen/Functions.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/quantized/Quantizer.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace igb::runtime {
namespace {

/// Calls LibTorch's operator `name` (overload `overload`) with `args`; returns its one result.
c10::IValue call(const char* name, const char* overload, std::vector<c10::IValue> args) {
  const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  std::vector<c10::IValue> stack(std::move(args));
  op.callBoxed(&stack);
  return stack.at(0);
}

/// Sizes of `shape` as a 4-D NCHW tensor (a linear layer's {N, C} as {N, C, 1, 1}).
std::vector<int64_t> nchw(const std::vector<int64_t>& shape) {
  if (shape.size() == 2) return {shape[0], shape[1], 1, 1};
  return shape;
}

/// The strides of the NHWC layout of NCHW `sizes`.
std::vector<int64_t> nhwc_strides(const std::vector<int64_t>& s) {
  return {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

/// A quint8 view of the 8-bit buffer `data` of NCHW `sizes` in NHWC: zero point 128 for a signed
/// tensor, whose bytes are first moved into `shifted` (x + 128 is the byte with its top bit
/// flipped), else 0.
at::Tensor quint8_view(void* data, const std::vector<int64_t>& sizes, double scale, bool is_signed,
                       at::Tensor& shifted) {
  int64_t count = 1;
  for (int64_t s : sizes) count *= s;
  if (is_signed) {
    if (!shifted.defined() || shifted.numel() != count) shifted = at::empty({count}, at::kByte);
    auto* in = static_cast<const uint8_t*>(data);
    auto* out = shifted.data_ptr<uint8_t>();
    for (int64_t i = 0; i < count; ++i) out[i] = in[i] ^ 0x80;
    data = out;
  }
  return at::from_blob_quantized_per_tensor_affine(
      data, sizes, nhwc_strides(sizes), [](void*) {}, static_cast<float>(scale),
      is_signed ? 128 : 0, at::TensorOptions().dtype(at::kQUInt8));
}

}  // namespace

bool qnnpack_available() {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), at::QEngine::QNNPACK) != engines.end();
}

QnnpackLayerStep::QnnpackLayerStep(QnnpackLayer layer, int src, int dst, StepInfo step_info)
    : layer_(std::move(layer)), src_(src), dst_(dst) {
  info = std::move(step_info);
  reads = {src_};
  if (layer_.sum) reads.push_back(dst_);
  writes = {dst_};
  auto w = layer_.weight_q.to(at::kChar).contiguous();
  if (w.dim() == 2) w = w.view({w.size(0), w.size(1), 1, 1});
  const auto qweight = at::_make_per_channel_quantized_tensor(
      w, layer_.weight_scale.to(at::kDouble).contiguous(), at::zeros({w.size(0)}, at::kLong), 0);
  // The packed weights carry their engine's kernels: QNNPACK's whatever engine runs later.
  auto& context = at::globalContext();
  const auto previous = context.qEngine();
  context.setQEngine(at::QEngine::QNNPACK);
  try {
    packed_ = call(
        "quantized::conv2d_prepack", "",
        {qweight, layer_.bias.to(at::kFloat).contiguous(), c10::List<int64_t>(layer_.stride),
         c10::List<int64_t>(layer_.padding), c10::List<int64_t>(layer_.dilation), layer_.groups});
  } catch (...) {
    context.setQEngine(previous);
    throw;
  }
  context.setQEngine(previous);
}

void QnnpackLayerStep::run(Plan& plan) {
  const auto in_sizes = nchw(layer_.input_shape), out_sizes = nchw(layer_.output_shape);
  auto x = quint8_view(plan.memory(src_).get_data_handle(), in_sizes, layer_.input_scale,
                       layer_.input_signed, shifted_);
  auto* dst = static_cast<uint8_t*>(plan.memory(dst_).get_data_handle());
  // Without an add the output is rounded once, on a zero point that keeps [lo, hi].
  const int64_t zero = layer_.sum || layer_.lo < 0 ? 128 : 0;
  auto y = call("quantized::conv2d", "new", {x, packed_, layer_.output_scale, zero}).toTensor();
  if (layer_.sum) {
    at::Tensor held;
    auto skip = quint8_view(dst, out_sizes, layer_.skip_scale, layer_.skip_signed, held);
    const int64_t out_zero = layer_.lo < 0 ? 128 : 0;
    y = call("quantized::add", "", {y, skip, layer_.output_scale, out_zero}).toTensor();
  }
  if (!y.is_contiguous(at::MemoryFormat::ChannelsLast) && !y.is_contiguous())
    throw std::logic_error("QNNPACK layer: an output in neither NHWC nor NCHW");
  y = y.contiguous(at::MemoryFormat::ChannelsLast);
  const int64_t z = y.q_zero_point(), count = y.numel();
  const auto* q = reinterpret_cast<const uint8_t*>(y.data_ptr<c10::quint8>());
  const int64_t lo = layer_.lo, hi = layer_.hi;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t v = std::clamp<int64_t>(static_cast<int64_t>(q[i]) - z, lo, hi);
    dst[i] = static_cast<uint8_t>(layer_.output_s8 ? static_cast<int8_t>(v) : v);
  }
}

}  // namespace igb::runtime
