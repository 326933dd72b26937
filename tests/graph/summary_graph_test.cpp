#include <gtest/gtest.h>

#include <set>

#include "compress/quantization_state.h"
#include "core/activation.h"
#include "core/error.h"
#include "graph/summary_graph.h"
#include "models/model.h"
#include "tests/tools/tools_support.h"
#include "tools/draw.h"

namespace igb::graph {

using tools::graph_of;
using tools::graph_to_dot;
using tools::make;

namespace {

/// "name@offset" for each reach, sorted, for compact comparisons.
std::vector<std::string> describe(const SummaryGraph& g, const std::vector<Reach>& reaches) {
  std::vector<std::string> out;
  for (const auto& r : reaches)
    out.push_back(g.op(r.op).name + "@" + std::to_string(r.offset) +
                  (r.block != 1 ? "x" + std::to_string(r.block) : "") + (r.barrier ? "!" : ""));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> names(const SummaryGraph& g, const std::vector<int>& ops) {
  std::vector<std::string> out;
  for (int i : ops) out.push_back(g.op(i).name);
  return out;
}

}  // namespace

TEST(SummaryGraph, ResNetOpsAreTiedToModulesAndParameters) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m, "resnet20_cifar");
  const auto& conv = g.op("layer2.0.conv1");
  EXPECT_EQ(conv.op_kind, OpKind::kConv);
  EXPECT_EQ(conv.module, "layer2.0.conv1");
  EXPECT_EQ(conv.params, std::vector<std::string>{"layer2.0.conv1.weight"});
  EXPECT_EQ(conv.kernel, (Shape{3, 3}));
  EXPECT_EQ(conv.stride, (Shape{2, 2}));
  EXPECT_EQ(g.shape(conv.inputs[0]), (Shape{1, 16, 32, 32}));
  EXPECT_EQ(g.shape(conv.outputs[0]), (Shape{1, 32, 16, 16}));
  const auto& bn = g.op("layer2.0.bn1");
  EXPECT_EQ(bn.op_kind, OpKind::kBatchNorm);
  EXPECT_EQ(bn.params.size(), 4u);  // weight, bias, running mean and var
  // Parameter-free ops are named by the module they run in.
  EXPECT_EQ(g.op("layer1.0.relu1").op_kind, OpKind::kReLU);
  EXPECT_EQ(g.op("layer1.0.add").op_kind, OpKind::kAdd);
  EXPECT_EQ(g.op("avgpool").op_kind, OpKind::kAdaptiveAvgPool);
  // Linear is one op with weight first, even though the trace splits it into t() and addmm.
  const auto& fc = g.op("fc");
  EXPECT_EQ(fc.op_kind, OpKind::kLinear);
  EXPECT_EQ(fc.params, (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(fc.param_shapes[0], (Shape{10, 64}));
  EXPECT_EQ(g.find("fc_2"), -1);
  EXPECT_THROW(g.index("layer1.0.conv3"), InputError);
  // Tracing leaves the model as it was.
  EXPECT_TRUE(m->is_training());
  for (const auto& p : m->parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(SummaryGraph, PredecessorsAndSuccessors) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m, "resnet20_cifar");
  const int add = g.index("layer1.1.add");
  EXPECT_EQ(names(g, g.predecessors(add)),
            (std::vector<std::string>{"layer1.0.relu2", "layer1.1.bn2"}));
  EXPECT_EQ(names(g, g.successors(add)), (std::vector<std::string>{"layer1.1.relu2"}));
  EXPECT_EQ(names(g, g.successors(g.index("layer1.1.relu2"))),
            (std::vector<std::string>{"layer1.2.conv1", "layer1.2.add"}));
}

// Channels produced before a residual add reach every consumer downstream of the chain of adds;
// the zero-padded downsampling shortcuts move them to an offset of 8 (16 → 32) and 24 (→ 64).
TEST(SummaryGraph, ResNetSuccessorsCrossResidualAddsAndPaddedShortcuts) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m, "resnet20_cifar");
  EXPECT_EQ(describe(g, g.parametric_successors(g.index("layer1.0.conv2"))),
            std::vector<std::string>{"layer1.0.bn2@0"});
  EXPECT_EQ(
      describe(g, g.parametric_successors(g.index("layer1.0.bn2"))),
      (std::vector<std::string>{"fc@24", "layer1.1.conv1@0", "layer1.2.conv1@0", "layer2.0.conv1@0",
                                "layer2.1.conv1@8", "layer2.2.conv1@8", "layer3.0.conv1@8",
                                "layer3.1.conv1@24", "layer3.2.conv1@24"}));
  // Within a stage the add ties the block's bn2 to the block input's producer.
  EXPECT_EQ(describe(g, g.parametric_predecessors(g.index("layer1.1.conv1"))),
            (std::vector<std::string>{"bn1@0", "layer1.0.bn2@0"}));
  // The reach remembers what it crossed.
  for (const auto& r : g.parametric_successors(g.index("layer1.0.bn2")))
    if (g.op(r.op).name == "layer1.1.conv1") {
      EXPECT_EQ(names(g, r.via), (std::vector<std::string>{"layer1.0.add", "layer1.0.relu2"}));
    }
}

// DenseNet: a layer's new channels land after the block input's channels in each concat.
TEST(SummaryGraph, DenseNetSuccessorsCarryConcatOffsets) {
  auto m = make("densenet_cifar", {{"depth", 16}});
  auto g = graph_of(m, "densenet_cifar");
  // conv1 → 24 channels; dense1.0 adds 12 (offset 24), dense1.1 adds 12 more (offset 36).
  EXPECT_EQ(describe(g, g.parametric_successors(g.index("dense1.0.conv2"))),
            (std::vector<std::string>{"dense1.1.bn1@24", "trans1.bn@24"}));
  EXPECT_EQ(describe(g, g.parametric_successors(g.index("conv1"))),
            (std::vector<std::string>{"dense1.0.bn1@0", "dense1.1.bn1@0", "trans1.bn@0"}));
  EXPECT_EQ(describe(g, g.parametric_predecessors(g.index("trans1.bn"))),
            (std::vector<std::string>{"conv1@0", "dense1.0.conv2@24", "dense1.1.conv2@36"}));
  EXPECT_EQ(g.op("dense1.1.concat").op_kind, OpKind::kConcat);
  EXPECT_EQ(g.op("trans1.pool").op_kind, OpKind::kAvgPool);
}

// After a flatten, each channel of the last conv is a block of H·W features of the linear layer.
TEST(SummaryGraph, FlattenMapsChannelsToFeatureBlocks) {
  auto m = make("simplenet_cifar");
  auto g = graph_of(m, "simplenet_cifar");
  auto reach = g.parametric_successors(g.index("conv2"));
  ASSERT_EQ(reach.size(), 1u);
  EXPECT_EQ(g.op(reach[0].op).op_kind, OpKind::kLinear);
  EXPECT_EQ(reach[0].block, 25);  // 16 channels of 5x5 → 400 features
  auto back = g.parametric_predecessors(reach[0].op);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(g.op(back[0].op).name, "conv2");
  EXPECT_EQ(back[0].block, 25);
}

TEST(SummaryGraph, PixelShuffleIsABarrierForChannelWalks) {
  auto m = make("espcn", {{"scale", 3}});
  auto g = graph_of(m, "espcn");
  int last = -1;
  for (const auto& op : g.ops())
    if (op.op_kind == OpKind::kConv) last = op.id;
  ASSERT_GE(last, 0);
  auto reach = g.parametric_successors(last);
  ASSERT_EQ(reach.size(), 1u);
  EXPECT_TRUE(reach[0].barrier);
  EXPECT_EQ(g.op(reach[0].op).op_kind, OpKind::kPixelShuffle);
  EXPECT_EQ(g.op(reach[0].op).factor, 3);
}

TEST(SummaryGraph, EveryZooModelTraces) {
  models::register_builtin_models();
  for (const auto& family : {"classify", "sr", "deblur"})
    for (const auto& name : models::model_names(family)) {
      nlohmann::json opts = nlohmann::json::object();
      // The ImageNet models at 224 would make this test slow; their layers are the same at 96.
      if (models::model_registry().get(name).defaults.value("input_size", 0) >= 224)
        opts["input_size"] = 96;
      auto m = make(name, opts);
      SummaryGraph g = graph_of(m, name);
      int convs = 0;
      std::set<std::string> unique;
      for (const auto& op : g.ops()) {
        unique.insert(op.name);
        if (op_info(op.op_kind).macs != MacRule::kNone) {
          ++convs;
          EXPECT_FALSE(op.module.empty()) << name << " " << op.name;
          EXPECT_FALSE(op.param("weight").empty()) << name << " " << op.name;
        }
      }
      EXPECT_GT(convs, 0) << name;
      EXPECT_EQ(unique.size(), g.ops().size()) << name;
      ASSERT_EQ(g.outputs().size(), 1u) << name;
    }
}

namespace {

/// A model with a tensor that requires grad but is not a parameter: the tracer cannot record it.
class Untraceable : public torch::nn::Module {
 public:
  Untraceable() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 2, 3)));
    scale = torch::ones({1, 2, 1, 1}).requires_grad_(true);
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv(x) * scale; }
  torch::nn::Conv2d conv{nullptr};
  torch::Tensor scale;
};

}  // namespace

TEST(SummaryGraph, AnUntraceableModelIsAnInputErrorNamingWhereItStopped) {
  auto m = std::make_shared<Untraceable>();
  try {
    SummaryGraph::build(
        *m, {1, 1, 8, 8}, [&](const torch::Tensor& x) { return m->forward(x); }, "untraceable");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot trace untraceable"), std::string::npos) << what;
    EXPECT_NE(what.find("requires grad"), std::string::npos) << what;
    EXPECT_NE(what.find("after aten::_convolution (conv)"), std::string::npos) << what;
  }
}

namespace {

/// A DoReFa activation slot made by hand (clipped_linear.py:ClippedLinearQuantization.forward:
/// clamp to [0, 1], then linear quantization on the grid k/n), so these tests need nothing of the
/// quantizers.
class SgDorefaActQuantImpl : public torch::nn::Module {
 public:
  explicit SgDorefaActQuantImpl(int64_t bits) : n_((int64_t{1} << bits) - 1) {}
  torch::Tensor forward(const torch::Tensor& x) {
    return at::fake_quantize_per_tensor_affine(at::clamp(x, 0, 1), 1.0 / static_cast<double>(n_), 0,
                                               0, n_);
  }
  int64_t n_;
};
TORCH_MODULE(SgDorefaActQuant);

/// Prepares `m` as a quantizer does (quantizer.py:Quantizer.prepare_model with
/// train_with_fp_copy): every conv and linear layer gets float_weight, weight_scale and
/// weight_bits buffers, every ReLU slot a fake-quantizing replacement.
void sg_quantize_by_hand(torch::nn::Module& m, int64_t weight_bits, int64_t act_bits) {
  torch::NoGradGuard no_grad;
  for (const auto& item : m.named_modules("", /*include_self=*/false)) {
    auto& mod = *item.value();
    if (auto* act = mod.as<ActivationImpl>()) {
      if (act->options().kind() == ActivationKind::kReLU)
        act->replace(torch::nn::AnyModule(SgDorefaActQuant(act_bits)));
      continue;
    }
    if (!mod.as<torch::nn::Conv2dImpl>() && !mod.as<torch::nn::LinearImpl>()) continue;
    auto params = mod.named_parameters(/*recurse=*/false);
    const auto w = params["weight"];
    mod.register_buffer("float_weight", w.detach().clone());
    mod.register_buffer("weight_scale", torch::ones({1}));
    mod.register_buffer("weight_bits", torch::full({}, weight_bits, torch::kLong));
  }
}

}  // namespace

TEST(SummaryGraph, AQuantizedResNetTracesWithKnownOpsAndTheSameMacs) {
  auto m = make("resnet20_cifar");
  const int64_t float_macs = graph_of(m, "resnet20_cifar").total_macs();
  EXPECT_EQ(float_macs, 40'551'040);
  sg_quantize_by_hand(*m, 3, 4);
  auto g = graph_of(m, "resnet20_cifar");
  int fake_quantize = 0, clamps = 0;
  for (const auto& op : g.ops()) {
    EXPECT_NE(op.op_kind, OpKind::kOther) << op.name << " " << op.kind;
    if (op.op_kind == OpKind::kFakeQuantize) {
      ++fake_quantize;
      EXPECT_FALSE(op.parametric()) << op.name;
    }
    if (op.op_kind == OpKind::kClamp) ++clamps;
    if (op.op_kind == OpKind::kConv || op.op_kind == OpKind::kLinear)
      EXPECT_EQ(op.weight_bits, 3) << op.name;
    else
      EXPECT_EQ(op.weight_bits, 0) << op.name;
  }
  // One ReLU after the stem and two in each of the 9 basic blocks.
  EXPECT_EQ(fake_quantize, 19);
  EXPECT_EQ(clamps, 19);
  EXPECT_EQ(g.total_macs(), float_macs);
  // The slot's ops are named after the activation they replace; 4 bits: n = 15, S = 1/15.
  const auto& clamp = g.op("layer1.0.relu1.clamp");
  EXPECT_EQ(clamp.op_kind, OpKind::kClamp);
  EXPECT_EQ(clamp.clamp_min, 0);
  EXPECT_EQ(clamp.clamp_max, 1);
  const auto& fq = g.op("layer1.0.relu1.fakequantize");
  EXPECT_EQ(fq.op_kind, OpKind::kFakeQuantize);
  EXPECT_DOUBLE_EQ(fq.scale, 1.0 / 15);
  EXPECT_EQ(fq.zero_point, 0);
  EXPECT_EQ(fq.quant_min, 0);
  EXPECT_EQ(fq.quant_max, 15);
  EXPECT_EQ(fq.attrs(), "s=0.0666667 q=[0,15]");
  EXPECT_TRUE(maps_zero_to_zero(fq));
  // Channel walks cross the slot as they crossed the ReLU.
  const auto reach = g.parametric_successors(g.index("layer1.0.bn1"));
  ASSERT_EQ(reach.size(), 1u);
  EXPECT_EQ(g.op(reach[0].op).name, "layer1.0.conv2");
  EXPECT_FALSE(reach[0].barrier);
  // The drawing labels quantized layers with their weight bits.
  const std::string dot = graph_to_dot(g, false);
  EXPECT_NE(dot.find("layer1.0.conv1\\nConv w3 k=3x3"), std::string::npos);
  EXPECT_NE(dot.find("fc\\nLinear w3"), std::string::npos);
  EXPECT_NE(dot.find("FakeQuantize s=0.0666667 q=[0,15]"), std::string::npos);
}

// The three QAT quantizers' modules (clipped_linear.py: ClippedLinearQuantization,
// LearnedClippedLinearQuantization; range_linear.py: FakeQuantizationWrapper) as a checkpoint's
// record rebuilds them: each traces to known ops (relu, clamp, fake quantize) with the float MACs.
TEST(SummaryGraph, EveryQuantizerClassTracesWithKnownOpsAndTheSameMacs) {
  const nlohmann::json none = nullptr;
  for (const std::string cls :
       {"DorefaQuantizer", "PACTQuantizer", "QuantAwareTrainRangeLinearQuantizer"}) {
    auto m = make("resnet20_cifar");
    nlohmann::json bits = nlohmann::json::object();
    for (const auto& item : m->named_modules("", false)) {
      if (item.value()->as<torch::nn::Conv2dImpl>())
        bits[item.key()] = {{"bits_activations", 4}, {"bits_weights", 4}, {"bits_bias", none}};
      if (item.value()->as<ActivationImpl>())
        bits[item.key()] = {{"bits_activations", 4}, {"bits_weights", none}, {"bits_bias", none}};
    }
    compress::restore_quantization(*m, {{"class", cls}, {"bits", bits}});
    auto g = graph_of(m, "resnet20_cifar");
    int fake_quantize = 0;
    for (const auto& op : g.ops()) {
      EXPECT_NE(op.op_kind, OpKind::kOther) << cls << " " << op.name << " " << op.kind;
      if (op.op_kind == OpKind::kFakeQuantize) {
        ++fake_quantize;
        EXPECT_GT(op.scale, 0) << cls << " " << op.name;
      }
      if (op.op_kind == OpKind::kConv) EXPECT_EQ(op.weight_bits, 4) << cls << " " << op.name;
    }
    EXPECT_EQ(fake_quantize, 19) << cls;
    EXPECT_EQ(g.total_macs(), 40'551'040) << cls;
    // PACT's α starts at 8: S = 8/15 on the grid [0, 15]; DoReFa's grid is 1/15 on [0, 1].
    const auto& fq = g.op("layer1.0.relu1.fakequantize");
    if (cls == "PACTQuantizer") EXPECT_EQ(fq.attrs(), "s=0.533333 q=[0,15]");
    if (cls == "DorefaQuantizer") EXPECT_EQ(fq.attrs(), "s=0.0666667 q=[0,15]");
    if (cls == "QuantAwareTrainRangeLinearQuantizer") {
      EXPECT_EQ(fq.quant_min, -7);  // 4 bits symmetric: n = 2^3 - 1
      EXPECT_EQ(fq.quant_max, 7);
    }
  }
}

}  // namespace igb::graph
