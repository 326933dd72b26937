#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace igb::graph {

struct OpNode;
using Shape = std::vector<int64_t>;

/// Every operator the summary graph knows. An operator the tracer records that is not in the
/// table is kOther: it is drawn and profiled, but every channel rule treats it as a barrier.
enum class OpKind : uint8_t {
  kConv,
  kConvTranspose,
  kLinear,
  kMatMul,
  kBatchNorm,
  kInstanceNorm,
  kLayerNorm,
  kGroupNorm,
  kReLU,
  kReLU6,
  kPReLU,
  kLeakyReLU,
  kTanh,
  kSigmoid,
  kSiLU,
  kGELU,
  kHardswish,
  kELU,
  kAbs,
  kNeg,
  kExp,
  kSqrt,
  kMaxPool,
  kAvgPool,
  kAdaptiveAvgPool,
  kAdaptiveMaxPool,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kConcat,
  kFlatten,
  kReshape,
  kPixelShuffle,
  kPad,
  kUpsample,
  kSlice,
  kDropout,
  kClamp,
  kMean,
  kSoftmax,
  kLogSoftmax,
  kContiguous,
  kClone,
  kCast,
  /// Fake quantization (quantize then dequantize in float): a quantizer's activation slot.
  kFakeQuantize,
  kOther,
};

/// How an op moves the channels (dimension 1) of its data inputs into its output.
enum class ChannelFlow : uint8_t {
  /// Channel c of each full-width input is channel c of the output (activations, per-channel
  /// norms, pooling, resampling, elementwise arithmetic, depthwise convolution).
  kPreserves,
  /// Weights mix every input channel into new output channels (convolution, linear).
  kMixes,
  /// Along dimension 1, each input's channels sit at its offset in the output; along another
  /// dimension, channels are preserved.
  kConcatenates,
  /// A constant pad of dimension 1 shifts channels by the pad in front (other pads preserve).
  kPads,
  /// Flatten or view: [N, C, H, W] → [N, C·H·W] turns channel c into a block of H·W features;
  /// merging only dimensions ≥ 2 preserves channels.
  kReshapes,
  /// Pixel shuffle: r² consecutive input channels make one output channel.
  kRegroups,
  /// Preserves channels when it acts on another dimension, a barrier when it acts on dimension 1
  /// (slice, softmax, mean).
  kPerDim,
  /// Nothing known: channels stop here.
  kBarrier,
};

/// Families for drawing and reports.
enum class OpFamily : uint8_t {
  kConvolution,
  kTransposedConvolution,
  kLinear,
  kNormalization,
  kActivation,
  kPooling,
  kJoin,
  kShape,
  kOther,
};

/// How multiply-accumulates are counted (torchvision, Distiller and fvcore convention).
enum class MacRule : uint8_t {
  kNone,
  /// Cout·Hout·Wout·(Cin/groups)·kh·kw: per output element, the weight's dims after the first.
  kPerOutputElement,
  /// Cin·(Cout/groups)·kh·kw per input pixel: per input element, the weight's dims after the first.
  kPerInputElement,
  /// in·out per output row.
  kLinear,
};

/// An attribute the graph decodes from the traced operator's arguments, by argument name.
enum class OpAttr : uint8_t {
  kStride,
  kPadding,
  kDilation,
  kGroups,
  kKernel,
  kOutputSize,
  kDim,
  kEndDim,
  kFactor,
  kPads,
  kMin,
  kMax,
  /// Fake quantization: scale, zero point, integer range and (per channel) the channel axis.
  kScale,
  kZeroPoint,
  kQuantMin,
  kQuantMax,
  kAxis
};

/// One schema argument name and the OpNode attribute it fills.
struct AttrArg {
  const char* argument;
  OpAttr attr;
};

/// Every fact about one operator kind that the graph walk, MACs, drawing, thinning and the
/// quantizers read: what the op is, not how any file format writes it (the ONNX exporter keeps
/// its own mapping from op kinds, deploy/onnx/onnx_ops.h). Adding an operator is adding one row
/// to the table in op_table.cpp.
struct OpInfo {
  OpKind kind = OpKind::kOther;
  /// Readable type ("Conv"), used in reports and for unnamed ops ("layer1.0.add").
  const char* type = "";
  /// Traced operators that are this op.
  std::vector<const char*> aten;
  ChannelFlow flow = ChannelFlow::kBarrier;
  /// Whether an all-zero input channel stays an all-zero output channel (f(0) = 0), before any
  /// per-channel parameters (norm biases, depthwise biases) are looked at.
  bool zero_preserving = false;
  OpFamily family = OpFamily::kOther;
  MacRule macs = MacRule::kNone;
  /// Schema arguments decoded into OpNode attributes.
  std::vector<AttrArg> attrs;
  /// Prefixes of module class names that implement the op (for naming parameter-free ops after
  /// their module): "MaxPool" matches torch::nn::MaxPool2d.
  std::vector<const char*> modules;

  // Channel facts of parametric ops, read by thinning.
  /// Weight dimensions of output and input channels (-1 when the op has no such weight).
  int64_t weight_out_dim = -1;
  int64_t weight_in_dim = -1;
  /// Module options that hold the output / input channel count ("out_channels").
  const char* out_option = nullptr;
  const char* in_option = nullptr;
  /// Per-channel ops (norms, PReLU): parameters and buffers indexed by channel, and the module
  /// option holding their count.
  std::vector<const char*> per_channel;
  const char* count_option = nullptr;

  // Quantization.
  /// Whether a quantizer fake-quantizes the op's data input and its weight (TensorRT's Q/DQ
  /// placement: the inputs of Conv, ConvTranspose and Gemm).
  bool quantize_input = false;
  bool quantize_weight = false;
};

/// The table row of `kind`.
const OpInfo& op_info(OpKind kind);
/// The kind of a traced operator ("aten::_convolution", transposed or not); kOther if unknown.
OpKind op_kind_of(const std::string& aten, bool transposed);
/// Every row, in enum order.
const std::vector<OpInfo>& op_table();
/// Readable type of an op: the table's, or the aten name without "aten::" for kOther.
std::string op_type_name(OpKind kind, const std::string& aten);

/// The operators of one kind whose arguments say something the kind does not (for readers of an
/// op's arguments, such as the ONNX exporter): which of them an op was traced as.
enum class OpSpelling : uint8_t {
  /// Any other operator.
  kPlain,
  /// Linear as aten::addmm (beta and alpha arguments).
  kAddmm,
  /// ReLU6 as aten::relu6 (bounds implied, not arguments).
  kRelu6,
  /// Pads whose mode is in the operator's name: aten::reflection_pad2d, replication_pad2d.
  kReflectionPad,
  kReplicationPad,
  /// aten::pad (mode as a string argument) and aten::_pad_enum (mode as at::padding_mode).
  kPadModeString,
  kPadModeEnum,
};
/// The spelling of a traced operator ("aten::addmm" → kAddmm).
OpSpelling op_spelling(const std::string& aten);

/// Whether a traced operator only re-views a tensor (linear's weight.t()): applied to a
/// parameter, it stands for the parameter itself.
bool is_parameter_view(const std::string& aten);

/// Whether a module of class `cls` ("MaxPool2d") can be the module of an op of `kind`.
bool module_implements(const std::string& cls, OpKind kind);

/// A producer writes new channels from weights: a convolution (not grouped), transposed
/// convolution (not grouped) or linear layer with a weight.
bool is_producer(const OpNode& op);
/// A depthwise convolution: groups = input channels = output channels.
bool is_depthwise(const OpNode& op, const Shape& input, const Shape& output);

/// Where channel c of data input `slot` of an op lands in its output.
struct ChannelLink {
  enum class Kind : uint8_t {
    /// Channel c → output channel c + offset.
    kSame,
    /// Channel c → output features [offset + c·block, offset + (c+1)·block) (a flatten).
    kBlock,
    /// Input channels [c·group, (c+1)·group) → output channel c (pixel shuffle).
    kGroup,
    /// A one-channel input broadcast over every output channel: it carries no channel of its own.
    kBroadcast,
    /// Weights mix every channel into new ones: the channel path ends.
    kMixed,
    /// The rules do not follow the op (a channel slice, a reflect pad of channels, an unknown op,
    /// a grouped convolution, mismatched channel counts).
    kBarrier,
  };
  Kind kind = Kind::kBarrier;
  int64_t offset = 0;
  int64_t block = 1;
  int64_t group = 1;
  /// For kSame: the input fills only part of the output's channels (a concat along channels, a
  /// channel pad).
  bool partial = false;
  /// For kSame through a channel pad: the output also has channels that no input wrote.
  bool pads_channels = false;
};

/// The one channel rule read by the graph walk, channel groups and thinning. `inputs` are the
/// shapes of all of the op's data inputs, `output` the shape of its first output.
ChannelLink channel_link(const OpNode& op, int slot, const std::vector<Shape>& inputs,
                         const Shape& output);

/// Whether the op maps an all-zero channel to an all-zero channel, from the table and the op's
/// own attributes (a clamp whose range excludes 0 does not; an add or subtract of a constant or
/// a parameter does not; a fake quantization does when its zero point lies in its range).
/// Per-channel parameters of norms and depthwise convs are checked by the caller.
bool maps_zero_to_zero(const OpNode& op);

/// "k=3x3 s=2 p=1 g=32" style summary of the attributes that matter for the op; "s=0.0666667
/// q=[0,15]" for a fake quantization.
std::string format_attrs(const OpNode& op);

}  // namespace igb::graph
