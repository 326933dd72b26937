// Shape and layout operators, constants and reductions as LibTorch operators.
#include <ATen/ExpandUtils.h>
#include <ATen/Functions.h>

#include <algorithm>
#include <limits>

#include "models/onnx/onnx_ops.h"

namespace igb::models::onnx_import {

namespace {

using Tensors = std::vector<at::Tensor>;

std::vector<int64_t> normalized(std::vector<int64_t> axes, int64_t rank) {
  for (auto& a : axes) a = a < 0 ? a + rank : a;
  return axes;
}

OpRun build_shape(const NodeView& n) {
  const int64_t start = n.opset() >= 15 ? n.i("start", 0) : 0;
  const bool has_end = n.opset() >= 15 && n.has("end");
  const int64_t end = has_end ? n.i("end", 0) : 0;
  return [start, has_end, end](const Tensors& in) -> Tensors {
    const int64_t r = in[0].dim();
    auto clampi = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
    const int64_t s = clampi(start);
    const int64_t e = has_end ? clampi(end) : r;
    std::vector<int64_t> dims(in[0].sizes().begin() + s, in[0].sizes().begin() + std::max(s, e));
    return {at::tensor(dims, at::kLong)};
  };
}

OpRun build_reshape(const NodeView& n) {
  const bool allow_zero = n.opset() >= 14 && n.i("allowzero", 0) != 0;
  // Before opset 5 the shape is an attribute.
  const bool by_attr = n.opset() < 5;
  const auto attr = n.ints("shape");
  return [allow_zero, by_attr, attr](const Tensors& in) -> Tensors {
    auto shape = by_attr ? attr : to_ints(in[1]);
    for (size_t i = 0; i < shape.size(); ++i)
      if (shape[i] == 0 && !allow_zero && static_cast<int64_t>(i) < in[0].dim())
        shape[i] = in[0].size(static_cast<int64_t>(i));
    return {in[0].reshape(shape)};
  };
}

OpRun build_flatten(const NodeView& n) {
  const int64_t axis = n.i("axis", 1);
  return [axis](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    if (a == 1 && x.dim() >= 2) return {x.flatten(1)};
    const int64_t rows = c10::multiply_integers(x.sizes().begin(), x.sizes().begin() + a);
    return {x.reshape({rows, x.numel() / std::max<int64_t>(rows, 1)})};
  };
}

OpRun build_transpose(const NodeView& n) {
  const auto perm = n.ints("perm");
  return [perm](const Tensors& in) -> Tensors {
    if (!perm.empty()) return {in[0].permute(perm)};
    std::vector<int64_t> rev(in[0].dim());
    for (int64_t i = 0; i < in[0].dim(); ++i) rev[i] = in[0].dim() - 1 - i;
    return {in[0].permute(rev)};
  };
}

OpRun build_squeeze(const NodeView& n) {
  const bool by_input = n.opset() >= 13;
  const auto attr = n.ints("axes");
  return [by_input, attr](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const bool given = by_input ? (in.size() > 1 && in[1].defined()) : !attr.empty();
    if (!given) return {x.squeeze()};
    auto axes = normalized(by_input ? to_ints(in[1]) : attr, x.dim());
    std::sort(axes.rbegin(), axes.rend());
    at::Tensor y = x;
    for (int64_t a : axes) y = y.squeeze(a);
    return {y};
  };
}

OpRun build_unsqueeze(const NodeView& n) {
  const bool by_input = n.opset() >= 13;
  const auto attr = n.ints("axes");
  return [by_input, attr](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    auto axes = by_input ? to_ints(in[1]) : attr;
    const int64_t rank = x.dim() + static_cast<int64_t>(axes.size());
    axes = normalized(axes, rank);
    std::sort(axes.begin(), axes.end());
    at::Tensor y = x;
    for (int64_t a : axes) y = y.unsqueeze(a);
    return {y};
  };
}

OpRun build_concat(const NodeView& n) {
  // Before opset 4 the axis defaults to 1.
  if (!n.has("axis") && n.opset() >= 4) n.refuse("has no axis");
  const int64_t axis = n.i("axis", 1);
  return [axis](const Tensors& in) -> Tensors {
    std::vector<at::Tensor> parts;
    for (const auto& t : in)
      if (t.defined()) parts.push_back(t);
    return {at::cat(parts, axis < 0 ? axis + parts[0].dim() : axis)};
  };
}

OpRun build_split(const NodeView& n) {
  const int64_t axis = n.i("axis", 0);
  const size_t outputs = n.node().outputs.size();
  // The sizes are an input from opset 13 on, and could be one in opset 1.
  const bool by_input = n.opset() >= 13 || (n.opset() < 2 && n.has_input(1));
  const auto attr = n.ints("split");
  const int64_t num_outputs = n.opset() >= 18 ? n.i("num_outputs", 0) : 0;
  if (n.opset() >= 18 && num_outputs != 0 && static_cast<size_t>(num_outputs) != outputs)
    n.refuse("num_outputs is " + std::to_string(num_outputs) + " but it has " +
             std::to_string(outputs) + " outputs");
  return [axis, outputs, by_input, attr](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    std::vector<int64_t> sizes =
        by_input && in.size() > 1 && in[1].defined() ? to_ints(in[1]) : attr;
    if (sizes.empty()) {
      // Equal parts; where they cannot be, the last is smaller (opset 18).
      const int64_t dim = x.size(a);
      const int64_t part =
          (dim + static_cast<int64_t>(outputs) - 1) / static_cast<int64_t>(outputs);
      for (size_t i = 0; i < outputs; ++i)
        sizes.push_back(std::max<int64_t>(std::min(part, dim - part * static_cast<int64_t>(i)), 0));
    }
    auto parts = at::split_with_sizes(x, sizes, a);
    return {parts.begin(), parts.end()};
  };
}

/// One axis of a Slice: the kept indices' start, end and step after numpy's clamping.
struct SliceAxis {
  int64_t start, end, step;
};

SliceAxis clamp_slice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
  }
  return {start, end, step};
}

OpRun build_slice(const NodeView& n) {
  const bool by_input = n.opset() >= 10;
  const auto a_starts = n.ints("starts");
  const auto a_ends = n.ints("ends");
  const auto a_axes = n.ints("axes");
  return [by_input, a_starts, a_ends, a_axes](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const auto starts = by_input ? to_ints(in[1]) : a_starts;
    const auto ends = by_input ? to_ints(in[2]) : a_ends;
    auto axes = by_input
                    ? (in.size() > 3 && in[3].defined() ? to_ints(in[3]) : std::vector<int64_t>{})
                    : a_axes;
    auto steps =
        by_input && in.size() > 4 && in[4].defined() ? to_ints(in[4]) : std::vector<int64_t>{};
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    at::Tensor y = x;
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t axis = axes[i] < 0 ? axes[i] + x.dim() : axes[i];
      const auto s = clamp_slice(starts[i], ends[i], steps[i], x.size(axis));
      if (s.step > 0) {
        y = y.slice(axis, s.start, std::max(s.start, s.end), s.step);
      } else {
        const auto idx = s.start > s.end ? at::arange(s.start, s.end, s.step, at::kLong)
                                         : at::empty({0}, at::kLong);
        y = y.index_select(axis, idx);
      }
    }
    return {y};
  };
}

OpRun build_gather(const NodeView& n) {
  const int64_t axis = n.i("axis", 0);
  return [axis](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t a = axis < 0 ? axis + x.dim() : axis;
    auto idx = in[1].to(at::kLong);
    idx = at::where(idx < 0, idx + x.size(a), idx);
    if (idx.dim() == 0) return {x.select(a, idx.item<int64_t>())};
    auto shape = x.sizes().vec();
    shape.erase(shape.begin() + a);
    shape.insert(shape.begin() + a, idx.sizes().begin(), idx.sizes().end());
    return {x.index_select(a, idx.reshape({-1})).reshape(shape)};
  };
}

/// Pad: constant, reflect and edge, on any dimensions, negative pads cutting.
OpRun build_pad(const NodeView& n) {
  const bool by_input = n.opset() >= 11;
  const std::string mode = n.s("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    n.refuse("mode '" + mode + "' is not constant, reflect or edge");
  const auto a_pads = n.ints(n.opset() < 2 ? "paddings" : "pads");
  const double a_value = n.f("value", 0.0f);
  return [by_input, mode, a_pads, a_value](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t r = x.dim();
    auto given = by_input ? to_ints(in[1]) : a_pads;
    std::vector<int64_t> axes;
    if (by_input && in.size() > 3 && in[3].defined()) axes = normalized(to_ints(in[3]), r);
    if (axes.empty())
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    const size_t k = axes.size();
    std::vector<int64_t> pads(2 * r, 0);
    for (size_t i = 0; i < k && 2 * k == given.size(); ++i) {
      pads[axes[i]] = given[i];
      pads[axes[i] + r] = given[i + k];
    }
    at::Scalar value = a_value;
    if (by_input && in.size() > 2 && in[2].defined() && in[2].numel() > 0)
      value = in[2].reshape({-1})[0].item();
    // No padding (PyTorch writes one before every average pooling): the tensor itself.
    if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) return {x};
    if (mode == "constant") {
      std::vector<int64_t> tp;
      for (int64_t i = r; i-- > 0;) {
        tp.push_back(pads[i]);
        tp.push_back(pads[i + r]);
      }
      return {at::constant_pad_nd(x, tp, value)};
    }
    // reflect and edge: each padded dimension gathers its source indices.
    at::Tensor y = x;
    for (int64_t d = 0; d < r; ++d) {
      const int64_t b = pads[d], e = pads[d + r], size = y.size(d);
      if (b == 0 && e == 0) continue;
      auto idx = at::arange(-b, size + e, at::kLong);
      if (mode == "edge") {
        idx = idx.clamp(0, size - 1);
      } else {
        const int64_t period = std::max<int64_t>(2 * (size - 1), 1);
        idx = at::remainder(idx, period);
        idx = at::where(idx >= size, period - idx, idx);
      }
      y = y.index_select(d, idx);
    }
    return {y};
  };
}

OpRun build_depth_to_space(const NodeView& n) {
  const int64_t b = n.i("blocksize", 0);
  if (b < 1) n.refuse("blocksize must be positive");
  const bool crd = n.s("mode", "DCR") == "CRD";
  return [b, crd](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    if (crd) return {at::pixel_shuffle(x, b)};
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    return {x.reshape({N, b, b, C / (b * b), H, W})
                .permute({0, 3, 4, 1, 5, 2})
                .reshape({N, C / (b * b), H * b, W * b})};
  };
}

OpRun build_space_to_depth(const NodeView& n) {
  const int64_t b = n.i("blocksize", 0);
  if (b < 1) n.refuse("blocksize must be positive");
  return [b](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    return {x.reshape({N, C, H / b, b, W / b, b})
                .permute({0, 3, 5, 1, 2, 4})
                .reshape({N, C * b * b, H / b, W / b})};
  };
}

OpRun build_constant(const NodeView& n) {
  at::Tensor value = n.tensor("value");
  if (!value.defined()) {
    if (n.has("value_float"))
      value = at::scalar_tensor(n.f("value_float", 0), at::kFloat);
    else if (n.has("value_int"))
      value = at::scalar_tensor(n.i("value_int", 0), at::kLong);
    else if (n.has("value_floats"))
      value = at::tensor(n.floats("value_floats"), at::kFloat);
    else if (n.has("value_ints"))
      value = at::tensor(n.ints("value_ints"), at::kLong);
    else
      n.refuse("holds no value igb reads (sparse and string constants are not supported)");
  }
  return [value](const Tensors&) -> Tensors { return {value}; };
}

OpRun build_constant_of_shape(const NodeView& n) {
  at::Tensor value = n.tensor("value");
  if (!value.defined()) value = at::zeros({1}, at::kFloat);
  if (value.numel() != 1) n.refuse("its value must hold one element");
  return [value](const Tensors& in) -> Tensors {
    return {value.reshape({}).expand(to_ints(in[0])).contiguous()};
  };
}

OpRun build_expand(const NodeView&) {
  return [](const Tensors& in) -> Tensors {
    const auto shape = at::infer_size(in[0].sizes(), to_ints(in[1]));
    return {in[0].expand(shape).contiguous()};
  };
}

OpRun build_tile(const NodeView& n) {
  if (n.opset() < 6) n.refuse("Tile before opset 6 (tiles and axis inputs) is not supported");
  return [](const Tensors& in) -> Tensors { return {in[0].repeat(to_ints(in[1]))}; };
}

OpRun build_range(const NodeView&) {
  return [](const Tensors& in) -> Tensors {
    const auto type = in[0].scalar_type();
    const double start = in[0].item<double>(), limit = in[1].item<double>(),
                 delta = in[2].item<double>();
    const int64_t count =
        std::max<int64_t>(static_cast<int64_t>(std::ceil((limit - start) / delta)), 0);
    return {(at::arange(count, at::kDouble) * delta + start).to(type)};
  };
}

enum class Reduce { kMean, kSum, kMax, kMin, kProd, kL1, kL2, kSumSquare, kLogSumExp };

at::Tensor reduce(const at::Tensor& x, Reduce kind, const std::vector<int64_t>& dims, bool keep) {
  switch (kind) {
    case Reduce::kMean:
      return x.mean(dims, keep);
    case Reduce::kSum:
      return x.sum(dims, keep);
    case Reduce::kMax:
      return x.amax(dims, keep);
    case Reduce::kMin:
      return x.amin(dims, keep);
    case Reduce::kProd: {
      at::Tensor y = x;
      auto sorted = dims;
      std::sort(sorted.rbegin(), sorted.rend());
      for (int64_t d : sorted) y = y.prod(d, keep);
      return y;
    }
    case Reduce::kL1:
      return x.abs().sum(dims, keep);
    case Reduce::kL2:
      return x.square().sum(dims, keep).sqrt();
    case Reduce::kSumSquare:
      return x.square().sum(dims, keep);
    case Reduce::kLogSumExp:
      return at::logsumexp(x, dims, keep);
  }
  return x;
}

/// Reduce*: axes as an attribute, or as input 1 from `input_from` (13 for ReduceSum, 18 for the
/// others); no axes reduce every dimension unless noop_with_empty_axes.
OpRun build_reduce(const NodeView& n, Reduce kind, int64_t input_from) {
  const bool keep = n.i("keepdims", 1) != 0;
  const bool noop = n.i("noop_with_empty_axes", 0) != 0;
  const bool by_input = n.opset() >= input_from;
  const auto attr = n.ints("axes");
  return [kind, keep, noop, by_input, attr](const Tensors& in) -> Tensors {
    const auto& x = in[0];
    auto axes = by_input
                    ? (in.size() > 1 && in[1].defined() ? to_ints(in[1]) : std::vector<int64_t>{})
                    : attr;
    if (axes.empty()) {
      if (noop) return {x};
      for (int64_t i = 0; i < x.dim(); ++i) axes.push_back(i);
    }
    axes = normalized(axes, x.dim());
    return {reduce(x, kind, axes, keep)};
  };
}

}  // namespace

void add_tensor_ops(std::map<std::string, OpBuild>& t) {
  t["Shape"] = build_shape;
  t["Size"] = [](const NodeView&) -> OpRun {
    return
        [](const Tensors& in) -> Tensors { return {at::scalar_tensor(in[0].numel(), at::kLong)}; };
  };
  t["Reshape"] = build_reshape;
  t["Flatten"] = build_flatten;
  t["Transpose"] = build_transpose;
  t["Squeeze"] = build_squeeze;
  t["Unsqueeze"] = build_unsqueeze;
  t["Concat"] = build_concat;
  t["Split"] = build_split;
  t["Slice"] = build_slice;
  t["Gather"] = build_gather;
  t["Pad"] = build_pad;
  t["DepthToSpace"] = build_depth_to_space;
  t["SpaceToDepth"] = build_space_to_depth;
  t["Constant"] = build_constant;
  t["ConstantOfShape"] = build_constant_of_shape;
  t["Expand"] = build_expand;
  t["Tile"] = build_tile;
  t["Range"] = build_range;
  t["ReduceMean"] = [](const NodeView& n) { return build_reduce(n, Reduce::kMean, 18); };
  t["ReduceSum"] = [](const NodeView& n) { return build_reduce(n, Reduce::kSum, 13); };
  t["ReduceMax"] = [](const NodeView& n) { return build_reduce(n, Reduce::kMax, 18); };
  t["ReduceMin"] = [](const NodeView& n) { return build_reduce(n, Reduce::kMin, 18); };
  t["ReduceProd"] = [](const NodeView& n) { return build_reduce(n, Reduce::kProd, 18); };
  t["ReduceL1"] = [](const NodeView& n) { return build_reduce(n, Reduce::kL1, 18); };
  t["ReduceL2"] = [](const NodeView& n) { return build_reduce(n, Reduce::kL2, 18); };
  t["ReduceSumSquare"] = [](const NodeView& n) { return build_reduce(n, Reduce::kSumSquare, 18); };
  t["ReduceLogSumExp"] = [](const NodeView& n) { return build_reduce(n, Reduce::kLogSumExp, 18); };
}

}  // namespace igb::models::onnx_import
