#include "graph/op_table.h"

#include <algorithm>
#include <sstream>
#include <unordered_map>

#include "graph/summary_graph.h"

namespace igb::graph {

namespace {

using F = ChannelFlow;
using A = OpAttr;

/// Builder for one table row, so each row reads as the facts it states.
struct Row {
  OpInfo info;
  Row(OpKind kind, const char* type, std::vector<const char*> aten, ChannelFlow flow, bool zero,
      OpFamily family) {
    info.kind = kind;
    info.type = type;
    info.aten = std::move(aten);
    info.flow = flow;
    info.zero_preserving = zero;
    info.family = family;
    info.modules = {type};
  }
  Row& macs(MacRule r) { return info.macs = r, *this; }
  Row& attrs(std::vector<AttrArg> a) { return info.attrs = std::move(a), *this; }
  Row& modules(std::vector<const char*> m) { return info.modules = std::move(m), *this; }
  Row& weights(int64_t out_dim, int64_t in_dim, const char* out_option, const char* in_option) {
    info.weight_out_dim = out_dim;
    info.weight_in_dim = in_dim;
    info.out_option = out_option;
    info.in_option = in_option;
    return *this;
  }
  Row& per_channel(std::vector<const char*> names, const char* count_option) {
    info.per_channel = std::move(names);
    info.count_option = count_option;
    return *this;
  }
  Row& quantized(bool input, bool weight) {
    info.quantize_input = input;
    info.quantize_weight = weight;
    return *this;
  }
};

const std::vector<AttrArg> kConvAttrs = {{"stride", A::kStride},
                                         {"padding", A::kPadding},
                                         {"dilation", A::kDilation},
                                         {"groups", A::kGroups}};
const std::vector<AttrArg> kPoolAttrs = {{"kernel_size", A::kKernel},
                                         {"stride", A::kStride},
                                         {"padding", A::kPadding},
                                         {"dilation", A::kDilation}};

// The table itself: one row per operator, exempt from the function-size limit.
std::vector<OpInfo> build_table() {  // NOLINT(readability-function-size)
  using Fam = OpFamily;
  using K = OpKind;
  std::vector<Row> rows = {
      Row(K::kConv, "Conv", {"aten::_convolution", "aten::conv2d", "aten::conv1d"}, F::kMixes, true,
          Fam::kConvolution)
          .macs(MacRule::kPerOutputElement)
          .attrs(kConvAttrs)
          .weights(0, 1, "out_channels", "in_channels")
          .quantized(true, true),
      Row(K::kConvTranspose, "ConvTranspose", {"aten::conv_transpose2d", "aten::conv_transpose1d"},
          F::kMixes, true, Fam::kTransposedConvolution)
          .macs(MacRule::kPerInputElement)
          .attrs(kConvAttrs)
          .weights(1, 0, "out_channels", "in_channels")
          .quantized(true, true),
      Row(K::kLinear, "Linear", {"aten::linear", "aten::addmm"}, F::kMixes, true, Fam::kLinear)
          .macs(MacRule::kLinear)
          .weights(0, 1, "out_features", "in_features")
          .quantized(true, true),
      Row(K::kMatMul, "MatMul", {"aten::matmul"}, F::kBarrier, true, Fam::kLinear),
      Row(K::kBatchNorm, "BatchNorm", {"aten::batch_norm"}, F::kPreserves, true,
          Fam::kNormalization)
          .per_channel({"weight", "bias", "running_mean", "running_var"}, "num_features"),
      Row(K::kInstanceNorm, "InstanceNorm", {"aten::instance_norm"}, F::kPreserves, true,
          Fam::kNormalization)
          .per_channel({"weight", "bias", "running_mean", "running_var"}, "num_features"),
      Row(K::kLayerNorm, "LayerNorm", {"aten::layer_norm"}, F::kBarrier, false,
          Fam::kNormalization),
      Row(K::kGroupNorm, "GroupNorm", {"aten::group_norm"}, F::kBarrier, false,
          Fam::kNormalization),
      Row(K::kReLU, "ReLU", {"aten::relu", "aten::relu_"}, F::kPreserves, true, Fam::kActivation)
          .modules({"ReLU", "Activation"}),
      Row(K::kReLU6, "ReLU6", {"aten::hardtanh", "aten::hardtanh_", "aten::relu6"}, F::kPreserves,
          true, Fam::kActivation),
      Row(K::kPReLU, "PReLU", {"aten::prelu"}, F::kPreserves, true, Fam::kActivation)
          .per_channel({"weight"}, "num_parameters"),
      Row(K::kLeakyReLU, "LeakyReLU", {"aten::leaky_relu", "aten::leaky_relu_"}, F::kPreserves,
          true, Fam::kActivation),
      Row(K::kTanh, "Tanh", {"aten::tanh", "aten::tanh_"}, F::kPreserves, true, Fam::kActivation),
      Row(K::kSigmoid, "Sigmoid", {"aten::sigmoid", "aten::sigmoid_"}, F::kPreserves, false,
          Fam::kActivation),
      // SiLU and Hardswish: Sigmoid or HardSigmoid, then Mul (HardSwish is opset 14).
      Row(K::kSiLU, "SiLU", {"aten::silu", "aten::silu_"}, F::kPreserves, true, Fam::kActivation),
      Row(K::kGELU, "GELU", {"aten::gelu"}, F::kPreserves, true, Fam::kActivation),
      Row(K::kHardswish, "Hardswish", {"aten::hardswish", "aten::hardswish_"}, F::kPreserves, true,
          Fam::kActivation),
      Row(K::kELU, "ELU", {"aten::elu", "aten::elu_"}, F::kPreserves, true, Fam::kActivation),
      Row(K::kAbs, "Abs", {"aten::abs"}, F::kPreserves, true, Fam::kOther),
      Row(K::kNeg, "Neg", {"aten::neg"}, F::kPreserves, true, Fam::kOther),
      Row(K::kExp, "Exp", {"aten::exp"}, F::kPreserves, false, Fam::kOther),
      Row(K::kSqrt, "Sqrt", {"aten::sqrt"}, F::kPreserves, true, Fam::kOther),
      Row(K::kMaxPool, "MaxPool", {"aten::max_pool2d", "aten::max_pool1d"}, F::kPreserves, true,
          Fam::kPooling)
          .attrs(kPoolAttrs),
      Row(K::kAvgPool, "AvgPool", {"aten::avg_pool2d"}, F::kPreserves, true, Fam::kPooling)
          .attrs({{"kernel_size", A::kKernel}, {"stride", A::kStride}, {"padding", A::kPadding}}),
      Row(K::kAdaptiveAvgPool, "AdaptiveAvgPool", {"aten::adaptive_avg_pool2d"}, F::kPreserves,
          true, Fam::kPooling)
          .attrs({{"output_size", A::kOutputSize}}),
      Row(K::kAdaptiveMaxPool, "AdaptiveMaxPool", {"aten::adaptive_max_pool2d"}, F::kPreserves,
          true, Fam::kPooling)
          .attrs({{"output_size", A::kOutputSize}}),
      Row(K::kAdd, "Add", {"aten::add", "aten::add_"}, F::kPreserves, true, Fam::kJoin)
          .quantized(true, false),
      Row(K::kSub, "Sub", {"aten::sub", "aten::sub_"}, F::kPreserves, true, Fam::kJoin),
      Row(K::kMul, "Mul", {"aten::mul", "aten::mul_"}, F::kPreserves, true, Fam::kJoin),
      Row(K::kDiv, "Div", {"aten::div", "aten::div_"}, F::kPreserves, true, Fam::kOther),
      Row(K::kConcat, "Concat", {"aten::cat"}, F::kConcatenates, true, Fam::kJoin)
          .attrs({{"dim", A::kDim}}),
      Row(K::kFlatten, "Flatten", {"aten::flatten"}, F::kReshapes, true, Fam::kShape)
          .attrs({{"start_dim", A::kDim}, {"end_dim", A::kEndDim}}),
      Row(K::kReshape, "Reshape", {"aten::view", "aten::reshape"}, F::kReshapes, true, Fam::kShape),
      Row(K::kPixelShuffle, "PixelShuffle", {"aten::pixel_shuffle"}, F::kRegroups, true,
          Fam::kShape)
          .attrs({{"upscale_factor", A::kFactor}}),
      Row(K::kPad, "Pad",
          // torch::nn::ReflectionPad2d and F::pad trace as aten::_pad_enum in LibTorch 1.13.
          {"aten::constant_pad_nd", "aten::reflection_pad2d", "aten::replication_pad2d",
           "aten::pad", "aten::_pad_enum"},
          F::kPads, true, Fam::kShape)
          .attrs({{"pad", A::kPads}, {"padding", A::kPads}})
          .modules({"ReflectionPad", "ReplicationPad", "ZeroPad", "ConstantPad", "ChannelPad"}),
      Row(K::kUpsample, "Upsample",
          {"aten::upsample_bicubic2d", "aten::upsample_bilinear2d", "aten::upsample_nearest2d"},
          F::kPreserves, true, Fam::kShape),
      Row(K::kSlice, "Slice", {"aten::slice"}, F::kPerDim, true, Fam::kShape)
          .attrs({{"dim", A::kDim}}),
      Row(K::kDropout, "Dropout", {"aten::dropout", "aten::dropout_", "aten::feature_dropout"},
          F::kPreserves, true, Fam::kOther),
      Row(K::kClamp, "Clamp", {"aten::clamp", "aten::clamp_"}, F::kPreserves, true,
          Fam::kActivation)
          .attrs({{"min", A::kMin}, {"max", A::kMax}}),
      Row(K::kMean, "Mean", {"aten::mean"}, F::kPerDim, true, Fam::kPooling),
      Row(K::kSoftmax, "Softmax", {"aten::softmax"}, F::kPerDim, false, Fam::kActivation)
          .attrs({{"dim", A::kDim}}),
      Row(K::kLogSoftmax, "LogSoftmax", {"aten::log_softmax"}, F::kPerDim, false, Fam::kActivation)
          .attrs({{"dim", A::kDim}}),
      Row(K::kContiguous, "Contiguous", {"aten::contiguous"}, F::kPreserves, true, Fam::kShape),
      Row(K::kClone, "Clone", {"aten::clone"}, F::kPreserves, true, Fam::kShape),
      Row(K::kCast, "Cast", {"aten::to"}, F::kPreserves, true, Fam::kShape),
      Row(K::kFakeQuantize, "FakeQuantize",
          {"aten::fake_quantize_per_tensor_affine", "aten::fake_quantize_per_channel_affine"},
          F::kPreserves, true, Fam::kActivation)
          .attrs({{"scale", A::kScale},
                  {"zero_point", A::kZeroPoint},
                  {"quant_min", A::kQuantMin},
                  {"quant_max", A::kQuantMax},
                  {"axis", A::kAxis}})
          .modules({}),
      Row(K::kOther, "", {}, F::kBarrier, false, Fam::kOther).modules({}),
  };
  std::vector<OpInfo> table;
  for (auto& r : rows) table.push_back(std::move(r.info));
  std::sort(table.begin(), table.end(),
            [](const OpInfo& a, const OpInfo& b) { return a.kind < b.kind; });
  for (size_t i = 0; i < table.size(); ++i)
    if (static_cast<size_t>(table[i].kind) != i)
      throw std::logic_error("the op table misses a row for an OpKind");
  return table;
}

int64_t channels_of(const Shape& s) { return s.size() >= 2 ? s[1] : 1; }

/// Pad amount before dimension 1 in a pad list (last dimension first), and whether it pads dim 1.
int64_t channel_pad_before(const std::vector<int64_t>& pads, size_t rank) {
  const size_t pair = rank - 2;
  return 2 * pair < pads.size() ? pads[2 * pair] : 0;
}
bool pads_channel_dim(const std::vector<int64_t>& pads, size_t rank) {
  if (rank < 2) return false;
  const size_t pair = rank - 2;
  return 2 * pair + 1 < pads.size() && (pads[2 * pair] != 0 || pads[2 * pair + 1] != 0);
}

}  // namespace

const std::vector<OpInfo>& op_table() {
  static const std::vector<OpInfo> table = build_table();
  return table;
}

const OpInfo& op_info(OpKind kind) { return op_table().at(static_cast<size_t>(kind)); }

OpKind op_kind_of(const std::string& aten, bool transposed) {
  static const auto by_aten = [] {
    std::unordered_map<std::string, OpKind> m;
    for (const auto& info : op_table())
      for (const char* a : info.aten) m.emplace(a, info.kind);
    return m;
  }();
  auto it = by_aten.find(aten);
  if (it == by_aten.end()) return OpKind::kOther;
  if (it->second == OpKind::kConv && transposed) return OpKind::kConvTranspose;
  return it->second;
}

std::string op_type_name(OpKind kind, const std::string& aten) {
  if (kind != OpKind::kOther) return op_info(kind).type;
  auto pos = aten.find("::");
  return pos == std::string::npos ? aten : aten.substr(pos + 2);
}

OpSpelling op_spelling(const std::string& aten) {
  static const std::unordered_map<std::string, OpSpelling> spellings = {
      {"aten::addmm", OpSpelling::kAddmm},
      {"aten::relu6", OpSpelling::kRelu6},
      {"aten::reflection_pad2d", OpSpelling::kReflectionPad},
      {"aten::replication_pad2d", OpSpelling::kReplicationPad},
      {"aten::pad", OpSpelling::kPadModeString},
      {"aten::_pad_enum", OpSpelling::kPadModeEnum}};
  const auto it = spellings.find(aten);
  return it == spellings.end() ? OpSpelling::kPlain : it->second;
}

bool is_parameter_view(const std::string& aten) {
  static const std::vector<std::string> views = {
      "aten::t",       "aten::transpose",  "aten::permute", "aten::view",
      "aten::reshape", "aten::contiguous", "aten::detach"};
  return std::find(views.begin(), views.end(), aten) != views.end();
}

bool module_implements(const std::string& cls, OpKind kind) {
  for (const char* prefix : op_info(kind).modules)
    if (cls.rfind(prefix, 0) == 0) return true;
  return false;
}

bool is_producer(const OpNode& op) {
  if (op.param("weight").empty()) return false;
  return op.op_kind == OpKind::kLinear ||
         ((op.op_kind == OpKind::kConv || op.op_kind == OpKind::kConvTranspose) && op.groups == 1);
}

bool is_depthwise(const OpNode& op, const Shape& input, const Shape& output) {
  return op.op_kind == OpKind::kConv && op.groups > 1 && op.groups == channels_of(input) &&
         channels_of(output) == channels_of(input);
}

ChannelLink channel_link(const OpNode& op, int slot, const std::vector<Shape>& inputs,
                         const Shape& output) {
  using Kind = ChannelLink::Kind;
  ChannelLink link;
  if (slot < 0 || slot >= static_cast<int>(inputs.size())) return link;
  const Shape& in = inputs[static_cast<size_t>(slot)];
  const int64_t cin = channels_of(in), cout = channels_of(output);
  auto same = [&](int64_t offset = 0) {
    link.kind = Kind::kSame;
    link.offset = offset;
    return link;
  };
  // Full width, broadcast, or a mismatch the rules cannot follow.
  auto elementwise = [&] {
    if (cin == cout) return same();
    if (cin == 1 && output.size() >= 2) {
      link.kind = Kind::kBroadcast;
      return link;
    }
    return link;  // barrier
  };
  const auto& info = op_info(op.op_kind);
  switch (info.flow) {
    case F::kMixes:
      if (is_producer(op)) {
        link.kind = Kind::kMixed;
        return link;
      }
      if (slot == 0 && is_depthwise(op, in, output)) return same();
      return link;  // a grouped convolution, or weights the graph could not name
    case F::kPreserves:
      return elementwise();
    case F::kConcatenates: {
      if (op.dim != 1) return elementwise();
      int64_t before = 0;
      for (int k = 0; k < slot; ++k) before += channels_of(inputs[static_cast<size_t>(k)]);
      same(before);
      link.partial = true;
      return link;
    }
    case F::kPads: {
      if (!pads_channel_dim(op.pads, in.size())) return elementwise();
      if (op.kind != "aten::constant_pad_nd") return link;  // reflect or replicate across channels
      same(channel_pad_before(op.pads, in.size()));
      link.partial = true;
      link.pads_channels = true;
      return link;
    }
    case F::kReshapes: {
      const bool flattens_channels =
          in.size() >= 3 && output.size() == 2 && output[0] == in[0] &&
          (op.op_kind == OpKind::kReshape ||
           (op.dim == 1 &&
            (op.end_dim == -1 || op.end_dim == static_cast<int64_t>(in.size()) - 1)));
      if (flattens_channels) {
        link.kind = Kind::kBlock;
        link.block = volume(Shape(in.begin() + 2, in.end()));
        return link;
      }
      if ((op.op_kind == OpKind::kFlatten && op.dim >= 2) || in == output) return same();
      return link;
    }
    case F::kRegroups:
      if (op.factor > 0 && cin == cout * op.factor * op.factor) {
        link.kind = Kind::kGroup;
        link.group = op.factor * op.factor;
      }
      return link;
    case F::kPerDim:
      if (op.op_kind == OpKind::kMean) {
        if (output.size() >= 2 && cin == cout) return same();
        return link;
      }
      if (op.dim != 1) return elementwise();
      return link;
    case F::kBarrier:
      return link;
  }
  return link;
}

bool maps_zero_to_zero(const OpNode& op) {
  const auto& info = op_info(op.op_kind);
  if (!info.zero_preserving) return false;
  if (op.op_kind == OpKind::kClamp) return op.clamp_min <= 0 && op.clamp_max >= 0;
  // fq(0) = (clamp(zp, qmin, qmax) - zp) * scale.
  if (op.op_kind == OpKind::kFakeQuantize)
    return op.zero_point >= op.quant_min && op.zero_point <= op.quant_max;
  // x + c or x - c for a constant or parameter c that the graph does not see as data.
  if ((op.op_kind == OpKind::kAdd || op.op_kind == OpKind::kSub) && op.inputs.size() < 2)
    return false;
  return true;
}

std::string format_attrs(const OpNode& op) {
  std::ostringstream s;
  auto dims = [](const Shape& v) { return shape_to_string(v); };
  switch (op.op_kind) {
    case OpKind::kConv:
    case OpKind::kConvTranspose:
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
      s << "k=" << dims(op.kernel);
      if (!op.stride.empty() && volume(op.stride) != 1) s << " s=" << dims(op.stride);
      if (std::any_of(op.padding.begin(), op.padding.end(), [](int64_t p) { return p != 0; }))
        s << " p=" << dims(op.padding);
      if (!op.dilation.empty() && volume(op.dilation) != 1) s << " d=" << dims(op.dilation);
      if (op.groups != 1) s << " g=" << op.groups;
      break;
    case OpKind::kAdaptiveAvgPool:
    case OpKind::kAdaptiveMaxPool:
    case OpKind::kUpsample:
      s << "out=" << dims(op.output_size);
      break;
    case OpKind::kConcat:
    case OpKind::kSoftmax:
    case OpKind::kLogSoftmax:
    case OpKind::kSlice:
      s << "dim=" << op.dim;
      break;
    case OpKind::kFlatten:
      s << "dims=" << op.dim << ".." << op.end_dim;
      break;
    case OpKind::kPixelShuffle:
      s << "r=" << op.factor;
      break;
    case OpKind::kPad:
      s << "pad=";
      for (size_t i = 0; i < op.pads.size(); ++i) s << (i ? "," : "") << op.pads[i];
      break;
    case OpKind::kFakeQuantize:
      if (op.scale > 0) s << "s=" << op.scale << " ";
      if (op.zero_point != 0) s << "zp=" << op.zero_point << " ";
      s << "q=[" << op.quant_min << "," << op.quant_max << "]";
      break;
    default:
      break;
  }
  return s.str();
}

}  // namespace igb::graph
