// The op table: one row per kind, and the one channel rule every consumer reads.
#include <gtest/gtest.h>

#include <set>

#include "graph/op_table.h"
#include "graph/summary_graph.h"

namespace igb::graph {

namespace {

OpNode node(OpKind kind) {
  OpNode op;
  op.op_kind = kind;
  op.type = op_info(kind).type;
  return op;
}

}  // namespace

TEST(OpTable, EveryKindHasOneRowWithAUniqueName) {
  std::set<std::string> names;
  for (size_t i = 0; i < op_table().size(); ++i) {
    const auto& info = op_table()[i];
    EXPECT_EQ(static_cast<size_t>(info.kind), i);
    if (info.kind != OpKind::kOther) {
      EXPECT_TRUE(names.insert(info.type).second) << info.type;
    }
  }
  EXPECT_EQ(op_table().size(), static_cast<size_t>(OpKind::kOther) + 1);
}

TEST(OpTable, TracedOperatorsMapToKinds) {
  EXPECT_EQ(op_kind_of("aten::_convolution", false), OpKind::kConv);
  EXPECT_EQ(op_kind_of("aten::_convolution", true), OpKind::kConvTranspose);
  EXPECT_EQ(op_kind_of("aten::addmm", false), OpKind::kLinear);
  EXPECT_EQ(op_kind_of("aten::relu_", false), OpKind::kReLU);
  EXPECT_EQ(op_kind_of("aten::hardswish", false), OpKind::kHardswish);
  EXPECT_EQ(op_kind_of("aten::silu", false), OpKind::kSiLU);
  EXPECT_EQ(op_kind_of("aten::pixel_shuffle", false), OpKind::kPixelShuffle);
  EXPECT_EQ(op_kind_of("aten::erfinv", false), OpKind::kOther);
  EXPECT_EQ(op_type_name(OpKind::kOther, "aten::erfinv"), "erfinv");
  EXPECT_EQ(op_type_name(OpKind::kSiLU, "aten::silu"), "SiLU");
  EXPECT_TRUE(op_info(OpKind::kConv).quantize_weight);
  EXPECT_FALSE(op_info(OpKind::kReLU).quantize_weight);
  EXPECT_EQ(op_kind_of("aten::fake_quantize_per_tensor_affine", false), OpKind::kFakeQuantize);
  EXPECT_EQ(op_kind_of("aten::fake_quantize_per_channel_affine", false), OpKind::kFakeQuantize);
  EXPECT_EQ(op_info(OpKind::kFakeQuantize).flow, ChannelFlow::kPreserves);
}

TEST(OpTable, ModulesImplementTheirOps) {
  EXPECT_TRUE(module_implements("MaxPool2d", OpKind::kMaxPool));
  EXPECT_TRUE(module_implements("Activation", OpKind::kReLU));
  EXPECT_TRUE(module_implements("ReflectionPad2d", OpKind::kPad));
  EXPECT_TRUE(module_implements("ChannelPad", OpKind::kPad));
  EXPECT_FALSE(module_implements("AvgPool2d", OpKind::kMaxPool));
  EXPECT_FALSE(module_implements("Conv2d", OpKind::kOther));
}

TEST(OpTable, ChannelLinks) {
  using Kind = ChannelLink::Kind;
  // Concat along channels: the second input starts after the first one's 8 channels.
  auto cat = node(OpKind::kConcat);
  cat.dim = 1;
  auto l = channel_link(cat, 1, {{1, 8, 4, 4}, {1, 5, 4, 4}}, {1, 13, 4, 4});
  EXPECT_EQ(l.kind, Kind::kSame);
  EXPECT_EQ(l.offset, 8);
  EXPECT_TRUE(l.partial);
  // Flatten of [N, 16, 5, 5]: each channel is a block of 25 features.
  auto flat = node(OpKind::kFlatten);
  flat.dim = 1;
  l = channel_link(flat, 0, {{1, 16, 5, 5}}, {1, 400});
  EXPECT_EQ(l.kind, Kind::kBlock);
  EXPECT_EQ(l.block, 25);
  // Pixel shuffle x3: 9 input channels per output channel.
  auto shuffle = node(OpKind::kPixelShuffle);
  shuffle.factor = 3;
  l = channel_link(shuffle, 0, {{1, 27, 4, 4}}, {1, 3, 12, 12});
  EXPECT_EQ(l.kind, Kind::kGroup);
  EXPECT_EQ(l.group, 9);
  // A zero pad of 4 channels in front and 4 behind (a CIFAR ResNet shortcut).
  auto pad = node(OpKind::kPad);
  pad.kind = "aten::constant_pad_nd";
  pad.pads = {0, 0, 0, 0, 4, 4};
  l = channel_link(pad, 0, {{1, 16, 8, 8}}, {1, 24, 8, 8});
  EXPECT_EQ(l.kind, Kind::kSame);
  EXPECT_EQ(l.offset, 4);
  EXPECT_TRUE(l.pads_channels);
  // A reflect pad of channels is not followed; of H and W it keeps channels.
  pad.kind = "aten::reflection_pad2d";
  EXPECT_EQ(channel_link(pad, 0, {{1, 16, 8, 8}}, {1, 24, 8, 8}).kind, Kind::kBarrier);
  pad.pads = {1, 1, 1, 1};
  EXPECT_EQ(channel_link(pad, 0, {{1, 16, 8, 8}}, {1, 16, 10, 10}).kind, Kind::kSame);
  // A one-channel operand of an add is broadcast; a mismatched one is a barrier.
  auto add = node(OpKind::kAdd);
  EXPECT_EQ(channel_link(add, 1, {{1, 8, 4, 4}, {1, 1, 4, 4}}, {1, 8, 4, 4}).kind,
            Kind::kBroadcast);
  EXPECT_EQ(channel_link(add, 1, {{1, 8, 4, 4}, {1, 4, 4, 4}}, {1, 8, 4, 4}).kind, Kind::kBarrier);
  // Softmax over channels mixes them; over W it does not.
  auto softmax = node(OpKind::kSoftmax);
  softmax.dim = 1;
  EXPECT_EQ(channel_link(softmax, 0, {{1, 8, 4, 4}}, {1, 8, 4, 4}).kind, Kind::kBarrier);
  softmax.dim = 3;
  EXPECT_EQ(channel_link(softmax, 0, {{1, 8, 4, 4}}, {1, 8, 4, 4}).kind, Kind::kSame);
  // An unknown op stops everything.
  EXPECT_EQ(channel_link(node(OpKind::kOther), 0, {{1, 8, 4, 4}}, {1, 8, 4, 4}).kind,
            Kind::kBarrier);
  // A depthwise convolution keeps channels; a grouped one is not followed.
  auto conv = node(OpKind::kConv);
  conv.params = {"dw.weight"};
  conv.groups = 8;
  EXPECT_EQ(channel_link(conv, 0, {{1, 8, 4, 4}}, {1, 8, 4, 4}).kind, Kind::kSame);
  conv.groups = 2;
  EXPECT_EQ(channel_link(conv, 0, {{1, 8, 4, 4}}, {1, 8, 4, 4}).kind, Kind::kBarrier);
  conv.groups = 1;
  EXPECT_EQ(channel_link(conv, 0, {{1, 8, 4, 4}}, {1, 16, 4, 4}).kind, Kind::kMixed);
}

TEST(OpTable, ZeroPreservation) {
  EXPECT_TRUE(maps_zero_to_zero(node(OpKind::kSiLU)));
  EXPECT_TRUE(maps_zero_to_zero(node(OpKind::kTanh)));
  EXPECT_FALSE(maps_zero_to_zero(node(OpKind::kSigmoid)));
  EXPECT_FALSE(maps_zero_to_zero(node(OpKind::kExp)));
  auto clamp = node(OpKind::kClamp);
  clamp.clamp_min = 0;
  clamp.clamp_max = 1;
  EXPECT_TRUE(maps_zero_to_zero(clamp));
  clamp.clamp_min = 0.1;
  EXPECT_FALSE(maps_zero_to_zero(clamp));
  auto add = node(OpKind::kAdd);
  add.inputs = {0, 1};
  EXPECT_TRUE(maps_zero_to_zero(add));
  add.inputs = {0};  // x + constant
  EXPECT_FALSE(maps_zero_to_zero(add));
  // fq(0) = (clamp(zp, qmin, qmax) - zp)·S: zero when the zero point lies in the range.
  auto fq = node(OpKind::kFakeQuantize);
  fq.quant_min = 0;
  fq.quant_max = 15;
  EXPECT_TRUE(maps_zero_to_zero(fq));
  fq.zero_point = -3;  // (0 - (-3))·S = 3S
  EXPECT_FALSE(maps_zero_to_zero(fq));
  fq.quant_min = -8;
  fq.quant_max = 7;
  EXPECT_TRUE(maps_zero_to_zero(fq));
}

TEST(OpTable, AttributesAreDecodedByArgumentName) {
  auto m = torch::nn::Sequential(
      torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).stride(2).padding(1).dilation(1)),
      torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(2).stride(2)), torch::nn::Flatten());
  auto g = SummaryGraph::build(*m.ptr(), {1, 3, 8, 8},
                               [&](const torch::Tensor& x) { return m->forward(x); });
  const auto& conv = g.op(0);
  EXPECT_EQ(conv.op_kind, OpKind::kConv);
  EXPECT_EQ(conv.stride, (Shape{2, 2}));
  EXPECT_EQ(conv.padding, (Shape{1, 1}));
  EXPECT_EQ(conv.kernel, (Shape{3, 3}));
  EXPECT_EQ(conv.attrs(), "k=3x3 s=2x2 p=1x1");
  const auto& pool = g.op(1);
  EXPECT_EQ(pool.op_kind, OpKind::kMaxPool);
  EXPECT_EQ(pool.kernel, (Shape{2, 2}));
  const auto& flat = g.op(2);
  EXPECT_EQ(flat.op_kind, OpKind::kFlatten);
  EXPECT_EQ(flat.dim, 1);
  EXPECT_EQ(flat.end_dim, -1);
  EXPECT_EQ(g.link(2, 0).kind, ChannelLink::Kind::kBlock);
  EXPECT_EQ(g.link(2, 0).block, 4);
}

// q_utils.py:linear_quantize/linear_dequantize as LibTorch's fake quantization computes them:
// scale, zero point and integer range come from the operator's arguments, per tensor or per
// channel (range_linear.py's per_channel_wts quantizes along dimension 0, here along axis 1).
TEST(OpTable, FakeQuantizeAttributesAreDecodedByArgumentName) {
  torch::nn::Module empty;
  const auto scales = torch::tensor({0.5f, 0.25f, 0.125f, 1.0f});
  const auto zero_points = torch::zeros({4}, torch::kInt);
  auto g = SummaryGraph::build(empty, {1, 4, 2, 2}, [&](const torch::Tensor& x) {
    auto y = at::fake_quantize_per_tensor_affine(x, 0.25, 2, 0, 15);
    return at::fake_quantize_per_channel_affine(y, scales, zero_points, 1, -8, 7);
  });
  ASSERT_EQ(g.ops().size(), 2u);
  const auto& per_tensor = g.op(0);
  EXPECT_EQ(per_tensor.op_kind, OpKind::kFakeQuantize);
  EXPECT_EQ(per_tensor.type, "FakeQuantize");
  EXPECT_EQ(per_tensor.scale, 0.25);
  EXPECT_EQ(per_tensor.zero_point, 2);
  EXPECT_EQ(per_tensor.quant_min, 0);
  EXPECT_EQ(per_tensor.quant_max, 15);
  EXPECT_EQ(per_tensor.attrs(), "s=0.25 zp=2 q=[0,15]");
  const auto& per_channel = g.op(1);
  EXPECT_EQ(per_channel.op_kind, OpKind::kFakeQuantize);
  EXPECT_EQ(per_channel.scale, 0);  // one scale per channel: none to show
  EXPECT_EQ(per_channel.zero_point, 0);
  EXPECT_EQ(per_channel.dim, 1);
  EXPECT_EQ(per_channel.quant_min, -8);
  EXPECT_EQ(per_channel.quant_max, 7);
  EXPECT_EQ(per_channel.attrs(), "q=[-8,7]");
  EXPECT_TRUE(per_channel.params.empty());
  EXPECT_EQ(g.link(1, 0).kind, ChannelLink::Kind::kSame);
}

}  // namespace igb::graph
