// Thinning removes zeroed structures; the thinned model must compute what the masked one did.
#include <gtest/gtest.h>

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <set>

#include "compress/scheduler.h"
#include "compress/thinning.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/thinning_recipe.h"
#include "models/classify/early_exit.h"
#include "models/model.h"

namespace igb::compress {

namespace {

using graph::SummaryGraph;

models::Model make(const std::string& name, nlohmann::json opts = nlohmann::json::object()) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto m = models::create_model(name, opts);
  // Non-trivial normalisation statistics and affine terms, so zeroing must be done right.
  torch::NoGradGuard no_grad;
  for (auto& item : m->named_buffers())
    if (item.key().find("running_mean") != std::string::npos)
      item.value().uniform_(-0.5, 0.5);
    else if (item.key().find("running_var") != std::string::npos)
      item.value().uniform_(0.5, 1.5);
  for (auto& item : m->named_modules())
    if (auto* bn = item.value()->as<torch::nn::BatchNorm2d>()) {
      bn->weight.uniform_(0.5, 1.5);
      bn->bias.uniform_(-0.2, 0.2);
    }
  m->eval();
  return m;
}

SummaryGraph graph_of(const models::Model& m) {
  return SummaryGraph::build(*m, m->input_shape(),
                             [m](const torch::Tensor& x) { return m->forward(x); });
}

/// Zeroes output channel `c` of producer `op` and everything that must be zero with it (the
/// filters of the whole channel group and its per-channel followers), as a group-aware filter
/// pruner does. Returns whether the group can be removed.
bool zero_filter(const models::Model& m, const SummaryGraph& g, const std::string& op, int64_t c) {
  bool removable = false;
  auto members = channel_group(*m, g, op, c, &removable);
  auto params = m->named_parameters();
  torch::NoGradGuard no_grad;
  for (const auto& mem : members)
    if (mem.role != GroupMember::Role::kConsumer)
      params[mem.tensor].select(mem.dim, mem.index).zero_();
  return removable;
}

int64_t size_of(const models::Model& m, const std::string& param, int64_t dim) {
  return m->named_parameters()[param].size(dim);
}

/// Thins `m` in place; returns max |masked output − thinned output| and checks a fresh model
/// rebuilt from the recipe and loaded with the thinned weights computes the same.
double thin_and_compare(const models::Model& m, const std::string& name, nlohmann::json opts,
                        ThinningPlan* out_plan, ThinningKind kind = ThinningKind::kFilters,
                        const WidthPolicy& width = {}) {
  torch::NoGradGuard no_grad;
  // In double precision, so the comparison sees thinning errors, not float32 summation order
  // (deep nets with random statistics reach activations in the thousands).
  m->to(torch::kDouble);
  auto shape = m->input_shape();
  shape[0] = 2;
  torch::manual_seed(1);
  const auto x = torch::randn(shape, torch::kDouble);
  const auto before = m->forward(x).clone();
  const int64_t params_before = models::count_parameters(*m);
  auto plan = plan_thinning(*m, graph_of(m), kind, width);
  EXPECT_FALSE(plan.empty()) << name;
  apply_thinning_recipe(*m, plan.recipe, name);
  const auto after = m->forward(x);
  EXPECT_EQ(after.sizes(), before.sizes()) << name;
  EXPECT_LT(models::count_parameters(*m), params_before) << name;
  // Replay: dense model + recipe + weights.
  auto fresh = models::create_model(name, opts);
  fresh->to(torch::kDouble);
  fresh->eval();
  apply_thinning_recipe(*fresh, plan.recipe, name);
  auto src = m->named_parameters();
  auto dst = fresh->named_parameters();
  for (auto& item : src) dst[item.key()].copy_(item.value());
  auto sb = m->named_buffers();
  auto db = fresh->named_buffers();
  for (auto& item : sb) db[item.key()].copy_(item.value());
  EXPECT_TRUE(torch::allclose(fresh->forward(x), after, 0, 0)) << name;
  if (out_plan) *out_plan = plan;
  return (after - before).abs().max().item<double>();
}

}  // namespace

TEST(Thinning, ResNet20InnerFiltersAndAResidualGroupAcrossPaddedShortcuts) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m);
  for (const char* conv : {"layer1.0.conv1", "layer2.1.conv1", "layer3.2.conv1"})
    for (int64_t c : {1, 5, 7}) EXPECT_TRUE(zero_filter(m, g, conv, c));
  // Channel 3 of stage 1 is tied by the adds to every block's conv2 and the stem conv, and by the
  // zero-padded shortcuts to channel 11 of stage 2 and 27 of stage 3 and to the fc input.
  auto group = channel_group(*m, g, "layer1.1.conv2", 3);
  std::set<std::string> producers;
  for (const auto& mem : group)
    if (mem.role == GroupMember::Role::kProducer)
      producers.insert(mem.op + "@" + std::to_string(mem.index));
  EXPECT_EQ(producers, (std::set<std::string>{
                           "conv1@3", "layer1.0.conv2@3", "layer1.1.conv2@3", "layer1.2.conv2@3",
                           "layer2.0.conv2@11", "layer2.1.conv2@11", "layer2.2.conv2@11",
                           "layer3.0.conv2@27", "layer3.1.conv2@27", "layer3.2.conv2@27"}));
  EXPECT_TRUE(zero_filter(m, g, "layer1.1.conv2", 3));
  // A padded-only channel of stage 2 (0..7 come from zeros) is a group of stage-2 and -3 convs.
  EXPECT_TRUE(zero_filter(m, g, "layer2.0.conv2", 2));
  ThinningPlan plan;
  EXPECT_LE(thin_and_compare(m, "resnet20_cifar", {}, &plan), 1e-5);
  EXPECT_EQ(size_of(m, "layer1.0.conv1.weight", 0), 13);
  EXPECT_EQ(size_of(m, "layer1.0.conv2.weight", 1), 13);
  EXPECT_EQ(size_of(m, "conv1.weight", 0), 15);
  EXPECT_EQ(size_of(m, "layer1.2.conv2.weight", 0), 15);
  EXPECT_EQ(size_of(m, "layer2.0.conv2.weight", 0), 30);
  EXPECT_EQ(size_of(m, "layer3.0.conv2.weight", 0), 62);
  EXPECT_EQ(size_of(m, "fc.weight", 1), 62);
  EXPECT_EQ(m->named_buffers()["layer2.0.bn2.running_mean"].size(0), 30);
  bool logged = false;
  for (const auto& line : plan.log)
    if (line.find("thinned together") != std::string::npos &&
        line.find("layer2.2.conv2") != std::string::npos)
      logged = true;
  EXPECT_TRUE(logged);
}

TEST(Thinning, AGroupWithOneLiveProducerIsKept) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m);
  // Only one of the ten producers of the group is zeroed: nothing can be removed.
  torch::NoGradGuard no_grad;
  m->named_parameters()["layer1.1.conv2.weight"][4].zero_();
  m->named_parameters()["layer1.1.bn2.weight"][4].zero_();
  m->named_parameters()["layer1.1.bn2.bias"][4].zero_();
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  EXPECT_TRUE(plan.empty());
  // ... and the plan says why the zeroed filter stays.
  ASSERT_EQ(plan.log.size(), 1u);
  EXPECT_NE(
      plan.log[0].find(
          "layer1.1.conv2: 1 zeroed filter kept: tied by adds or concats to live filters of conv1, "
          "layer1.0.conv2"),
      std::string::npos)
      << plan.log[0];
}

TEST(Thinning, ResNet56BlocksFirstConvs) {
  auto m = make("resnet56_cifar");
  auto g = graph_of(m);
  for (int stage = 1; stage <= 3; ++stage)
    for (int b = 0; b < 9; b += 2)
      for (int64_t c = 0; c < 4; ++c)
        zero_filter(m, g, "layer" + std::to_string(stage) + "." + std::to_string(b) + ".conv1",
                    2 * c + 1);
  EXPECT_LE(thin_and_compare(m, "resnet56_cifar", {}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, "layer3.8.conv1.weight", 0), 60);
  EXPECT_EQ(size_of(m, "layer3.7.conv1.weight", 0), 64);
}

bool logged(const ThinningPlan& plan, const std::string& text) {
  for (const auto& line : plan.log)
    if (line.find(text) != std::string::npos) return true;
  return false;
}

TEST(Thinning, RoundToKeepsZeroedFiltersUntilWidthsAreMultiples) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m);
  for (int64_t c = 0; c < 10; ++c) EXPECT_TRUE(zero_filter(m, g, "layer1.0.conv1", c));
  for (int64_t c : {1, 5, 9}) EXPECT_TRUE(zero_filter(m, g, "layer2.1.conv1", c));
  for (int64_t c : {0, 2, 4, 6, 8, 10, 12, 14, 16})
    EXPECT_TRUE(zero_filter(m, g, "layer3.2.conv1", c));
  ThinningPlan plan;
  EXPECT_LE(thin_and_compare(m, "resnet20_cifar", {}, &plan, ThinningKind::kFilters,
                             round_to_multiple(8)),
            1e-5);
  // 6 left of 16 -> 8; 29 of 32 -> 32 (the dense width: nothing goes); 55 of 64 -> 56.
  EXPECT_EQ(size_of(m, "layer1.0.conv1.weight", 0), 8);
  EXPECT_EQ(size_of(m, "layer1.0.conv2.weight", 1), 8);
  EXPECT_EQ(m->named_buffers()["layer1.0.bn1.running_var"].size(0), 8);
  EXPECT_EQ(size_of(m, "layer2.1.conv1.weight", 0), 32);
  EXPECT_EQ(size_of(m, "layer3.2.conv1.weight", 0), 56);
  EXPECT_EQ(size_of(m, "layer3.2.conv2.weight", 1), 56);
  EXPECT_EQ(plan.removed_groups, 8 + 8);
  EXPECT_EQ(plan.rounded_groups, 2 + 3 + 1);
  EXPECT_TRUE(logged(plan, "layer1.0.conv1: 2 zeroed filters kept to round 6 channels to 8"));
  EXPECT_TRUE(logged(plan, "layer2.1.conv1: 3 zeroed filters kept to round 29 channels to 32"));
  EXPECT_TRUE(logged(plan, "layer3.2.conv1: 1 zeroed filter kept to round 55 channels to 56"));
  // Filters kept for rounding are not reported again as filters thinning could not remove.
  EXPECT_FALSE(logged(plan, "zeroed filter kept:")) << plan.log.size();
  EXPECT_FALSE(logged(plan, "zeroed filters kept:"));
}

TEST(Thinning, APolicySeesEachSetOfTensorsNarrowedAlikeOnceWithItsLayers) {
  auto m = make("resnet20_cifar");
  auto g = graph_of(m);
  // Two stage-1 trunk channels: tied by the adds to every stage-1 block and, through the padded
  // shortcuts, to stage 2 and 3 (16 -> 14, 32 -> 30, 64 -> 62).
  for (int64_t c : {3, 4}) EXPECT_TRUE(zero_filter(m, g, "layer1.1.conv2", c));
  std::vector<ThinnedTensor> seen;
  int64_t inner_width = -1;  // what kept_of says of a block's inner tensor, asked during the call
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters, [&](const ThinnedTensor& t) {
    seen.push_back(t);
    if (t.dense == 16) inner_width = t.kept_of(g.op("layer1.0.conv1").outputs[0]);
    return t.kept;
  });
  EXPECT_EQ(plan.removed_groups, 2);
  EXPECT_EQ(plan.rounded_groups, 0);
  const ThinnedTensor* trunk = nullptr;
  for (const auto& t : seen)
    if (t.dense == 16) {
      EXPECT_EQ(trunk, nullptr) << "the stage-1 trunk is one set, asked once";
      trunk = &t;
    }
  ASSERT_NE(trunk, nullptr);
  EXPECT_EQ(trunk->kept, 14);
  EXPECT_GE(trunk->values.size(), 7u);  // conv1, bn1, relu, and each block's bn2, add, relu
  std::set<std::string> producers, consumers;
  for (const auto* op : trunk->producers) producers.insert(op->name);
  for (const auto* op : trunk->consumers) consumers.insert(op->name);
  EXPECT_EQ(producers,
            (std::set<std::string>{"conv1", "layer1.0.conv2", "layer1.1.conv2", "layer1.2.conv2"}));
  EXPECT_EQ(consumers, (std::set<std::string>{"layer1.0.conv1", "layer1.1.conv1", "layer1.2.conv1",
                                              "layer2.0.conv1"}));
  EXPECT_EQ(inner_width, 16);
  // Rounding the trunk back to 16 keeps both groups, which widens stages 2 and 3 with it.
  plan = plan_thinning(*m, g, ThinningKind::kFilters, round_to_multiple(16));
  EXPECT_TRUE(plan.empty());
  EXPECT_EQ(plan.rounded_groups, 2);
  EXPECT_THROW(round_to_multiple(0), InputError);
}

TEST(Thinning, Vgg16CifarThroughPoolingFlattenAndBatchNorm1d) {
  auto m = make("vgg16_cifar");
  auto g = graph_of(m);
  for (int64_t c = 0; c < 32; ++c) zero_filter(m, g, "features.0", 2 * c);
  for (int64_t c = 0; c < 100; ++c) zero_filter(m, g, "features.40", c);
  for (int64_t c = 0; c < 10; ++c) zero_filter(m, g, "classifier.0", c);
  EXPECT_LE(thin_and_compare(m, "vgg16_cifar", {}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, "features.0.weight", 0), 32);
  EXPECT_EQ(size_of(m, "features.3.weight", 1), 32);
  EXPECT_EQ(size_of(m, "classifier.0.weight", 1), 412);
  EXPECT_EQ(size_of(m, "classifier.0.weight", 0), 502);
  EXPECT_EQ(size_of(m, "classifier.1.weight", 0), 502);
  EXPECT_EQ(size_of(m, "classifier.3.weight", 1), 502);
}

TEST(Thinning, DenseNetConcatOffsets) {
  auto m = make("densenet_cifar");
  auto g = graph_of(m);
  // A growth conv's channels land at an offset in every later concat of the block.
  for (int64_t c : {0, 5, 11}) EXPECT_TRUE(zero_filter(m, g, "dense1.0.conv2", c));
  for (int64_t c : {1, 2}) EXPECT_TRUE(zero_filter(m, g, "dense2.3.conv2", c));
  for (int64_t c : {0, 7, 9}) EXPECT_TRUE(zero_filter(m, g, "dense1.2.conv1", c));
  for (int64_t c : {3, 4}) EXPECT_TRUE(zero_filter(m, g, "trans1.conv", c));
  EXPECT_LE(thin_and_compare(m, "densenet_cifar", {}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, "dense1.0.conv2.weight", 0), 9);
  EXPECT_EQ(size_of(m, "dense1.1.conv1.weight", 1), 24 + 9);
  EXPECT_EQ(size_of(m, "trans1.conv.weight", 1), 96 - 3);
  EXPECT_EQ(size_of(m, "dense1.2.conv2.weight", 1), 45);
  EXPECT_EQ(size_of(m, "trans1.conv.weight", 0), 46);
}

TEST(Thinning, MobileNetV2ThroughDepthwiseConvolutions) {
  auto m = make("mobilenet_v2", {{"input_size", 64}});
  auto g = graph_of(m);
  for (int64_t c = 0; c < 40; c += 3) EXPECT_TRUE(zero_filter(m, g, "features.3.conv.0.0", c));
  for (int64_t c = 0; c < 6; ++c) EXPECT_TRUE(zero_filter(m, g, "features.15.conv.0.0", 10 * c));
  // The bottleneck output of features.5 is tied by residual adds to features.4 and .6.
  EXPECT_TRUE(zero_filter(m, g, "features.5.conv.2", 7));
  EXPECT_LE(thin_and_compare(m, "mobilenet_v2", {{"input_size", 64}}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, "features.3.conv.0.0.weight", 0), 144 - 14);
  EXPECT_EQ(size_of(m, "features.3.conv.1.0.weight", 0), 144 - 14);  // depthwise follows
  EXPECT_EQ(size_of(m, "features.3.conv.2.weight", 1), 144 - 14);
  EXPECT_EQ(size_of(m, "features.4.conv.2.weight", 0), 31);
  EXPECT_EQ(size_of(m, "features.7.conv.0.0.weight", 1), 31);
  auto modules = m->named_modules();
  auto* dw = modules["features.3.conv.1.0"]->as<torch::nn::Conv2d>();
  EXPECT_EQ(dw->options.groups(), 130);
}

TEST(Thinning, FsrcnnPReLUSlopesAndTransposedConvInput) {
  auto m = make("fsrcnn", {{"scale", 3}});
  auto g = graph_of(m);
  for (int64_t c : {0, 3, 4, 9, 11}) EXPECT_TRUE(zero_filter(m, g, "mid_part.0.0", c));
  for (int64_t c = 0; c < 22; ++c) EXPECT_TRUE(zero_filter(m, g, "mid_part.9.0", 2 * c));
  EXPECT_LE(thin_and_compare(m, "fsrcnn", {{"scale", 3}}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, "mid_part.0.1.weight", 0), 7);
  EXPECT_EQ(size_of(m, "mid_part.1.weight", 1), 7);
  EXPECT_EQ(size_of(m, "mid_part.9.1.weight", 0), 34);
  EXPECT_EQ(size_of(m, "last_part.weight", 0), 34);
}

TEST(Thinning, EspcnAndThePixelShuffleOutput) {
  auto m = make("espcn", {{"scale", 3}});
  auto g = graph_of(m);
  std::vector<std::string> convs;
  for (const auto& op : g.ops())
    if (op.op_kind == graph::OpKind::kConv) convs.push_back(op.name);
  ASSERT_EQ(convs.size(), 3u);
  for (int64_t c : {1, 2, 8}) EXPECT_TRUE(zero_filter(m, g, convs[0], c));
  for (int64_t c : {0, 6}) EXPECT_TRUE(zero_filter(m, g, convs[1], c));
  // The last conv feeds the pixel shuffle and the model's output: never removable (the group of
  // channel 0 is its 9 pixel-shuffle channels), and the plan
  // says so.
  EXPECT_FALSE(zero_filter(m, g, convs[2], 0));
  bool said = false;
  for (const auto& line : plan_thinning(*m, g, ThinningKind::kFilters).log)
    if (line.find(convs[2] + ": 9 zeroed filters kept: its channels reach the model's output") !=
        std::string::npos)
      said = true;
  EXPECT_TRUE(said) << join(plan_thinning(*m, g, ThinningKind::kFilters).log, " | ");
  EXPECT_LE(thin_and_compare(m, "espcn", {{"scale", 3}}, nullptr), 1e-5);
  EXPECT_EQ(size_of(m, convs[0] + ".weight", 0), 61);
  EXPECT_EQ(size_of(m, convs[2] + ".weight", 0), 9);
}

// conv2's 16 channels reach fc1 through max-pool and flatten as blocks of 5x5 = 25 features.
TEST(Thinning, LinearInputsAfterFlattenGoInBlocksOfHW) {
  auto m = make("simplenet_cifar");
  auto g = graph_of(m);
  for (int64_t c : {0, 9, 15}) EXPECT_TRUE(zero_filter(m, g, "conv2", c));
  EXPECT_LE(thin_and_compare(m, "simplenet_cifar", {}, nullptr), 1e-9);
  EXPECT_EQ(size_of(m, "conv2.weight", 0), 13);
  EXPECT_EQ(size_of(m, "fc1.weight", 1), 13 * 25);
}

namespace {

/// conv (8 channels) -> pixel shuffle x2 (2 channels) -> conv: r² = 4 conv channels per output.
class ShuffleNet : public torch::nn::Module {
 public:
  ShuffleNet() {
    a = register_module("a", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1)));
    b = register_module("b", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1)));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return b(torch::pixel_shuffle(torch::relu(a(x)), 2));
  }
  torch::nn::Conv2d a{nullptr}, b{nullptr};
};

}  // namespace

TEST(Thinning, PixelShuffleGroupsGoWhole) {
  torch::manual_seed(0);
  auto m = std::make_shared<ShuffleNet>();
  m->to(torch::kDouble);
  auto g =
      SummaryGraph::build(*m, {1, 3, 8, 8}, [m](const torch::Tensor& x) { return m->forward(x); });
  torch::NoGradGuard no_grad;
  // Channel 5 alone: its pixel-shuffle group (4..7) still has live channels, nothing goes.
  m->a->weight[5].zero_();
  m->a->bias[5].zero_();
  EXPECT_TRUE(plan_thinning(*m, g, ThinningKind::kFilters).empty());
  // The whole group 4..7: the shuffle's output channel 1 and b's input channel 1 go with it.
  for (int64_t c = 4; c < 8; ++c) {
    m->a->weight[c].zero_();
    m->a->bias[c].zero_();
  }
  const auto x = torch::randn({2, 3, 8, 8}, torch::kDouble);
  const auto before = m->forward(x);
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  ASSERT_FALSE(plan.empty());
  apply_thinning_recipe(*m, plan.recipe, "shuffle");
  EXPECT_EQ(m->a->weight.size(0), 4);
  EXPECT_EQ(m->b->weight.size(1), 1);
  EXPECT_LE((m->forward(x) - before).abs().max().item<double>(), 1e-12);
}

/// resnet20_cifar with an exit after layer1.0.relu1 (AvgPool2d(3), Flatten, Linear(1600, 10)),
/// whose channels only layer1.0.conv1 writes, in double precision.
models::Model resnet_with_inner_exit() {
  auto m = make("resnet20_cifar");
  torch::manual_seed(2);
  models::classify::attach_exits(
      *m, {{"layer1.0.relu1", models::classify::distiller_resnet_cifar_exits(10, 32)[0].head}});
  m->to(torch::kDouble);
  m->eval();
  return m;
}

std::vector<at::Tensor> exits_of(const models::Model& m, const at::Tensor& x) {
  return models::classify::forward_exits(
      *m, [&m](const at::Tensor& t) { return m->forward(t); }, x);
}

TEST(Thinning, AnEarlyExitsHeadLosesTheFeaturesOfRemovedFilters) {
  auto m = resnet_with_inner_exit();
  const auto g = graph_of(m);
  zero_filter(m, g, "layer1.0.conv1", 3);
  torch::NoGradGuard no_grad;
  torch::manual_seed(1);
  const auto x = torch::randn({2, 3, 32, 32}, torch::kDouble);
  const auto before = exits_of(m, x);
  const auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  ASSERT_FALSE(plan.empty()) << join(plan.log, " | ");
  apply_thinning_recipe(*m, plan.recipe, "test");
  EXPECT_EQ(size_of(m, "layer1.0.conv1.weight", 0), 15);
  // The head reads 16 channels of 10x10 features; channel 3's block of 100 is gone.
  EXPECT_EQ(size_of(m, "layer1.0.relu1.branch_net.2.weight", 1), 1500);
  const auto after = exits_of(m, x);
  EXPECT_LT((after[0] - before[0]).abs().max().item<double>(), 1e-9);
  EXPECT_LT((after[1] - before[1]).abs().max().item<double>(), 1e-9);
}

TEST(Thinning, AnEarlyExitsHeadIsOneMoreReaderOfItsChannels) {
  auto m = resnet_with_inner_exit();
  torch::NoGradGuard no_grad;
  auto params = m->named_parameters();
  // layer1.0.conv2 no longer reads channel 5, but the head still does: nothing to remove.
  params["layer1.0.conv2.weight"].select(1, 5).zero_();
  EXPECT_TRUE(plan_thinning(*m, graph_of(m), ThinningKind::kChannels).empty());
  // Once the head's features of channel 5 are zero too, the channel goes from both.
  params["layer1.0.relu1.branch_net.2.weight"].narrow(1, 500, 100).zero_();
  torch::manual_seed(1);
  const auto x = torch::randn({2, 3, 32, 32}, torch::kDouble);
  const auto before = exits_of(m, x);
  const auto plan = plan_thinning(*m, graph_of(m), ThinningKind::kChannels);
  ASSERT_FALSE(plan.empty());
  apply_thinning_recipe(*m, plan.recipe, "test");
  EXPECT_EQ(size_of(m, "layer1.0.conv2.weight", 1), 15);
  EXPECT_EQ(size_of(m, "layer1.0.relu1.branch_net.2.weight", 1), 1500);
  const auto after = exits_of(m, x);
  EXPECT_LT((after[0] - before[0]).abs().max().item<double>(), 1e-9);
  EXPECT_LT((after[1] - before[1]).abs().max().item<double>(), 1e-9);
}

TEST(Thinning, ChannelRemovalFollowsZeroInputChannels) {
  auto m = make("simplenet_cifar");
  {
    torch::NoGradGuard no_grad;
    auto w = m->named_parameters()["conv2.weight"];
    w.select(1, 2).zero_();
    w.select(1, 4).zero_();
  }
  ThinningPlan plan;
  EXPECT_LE(thin_and_compare(m, "simplenet_cifar", {}, &plan, ThinningKind::kChannels), 1e-5);
  EXPECT_EQ(size_of(m, "conv1.weight", 0), 4);
  EXPECT_EQ(size_of(m, "conv2.weight", 1), 4);
}

TEST(Thinning, OptimizerStateAndMasksAreSliced) {
  for (const std::string opt : {"sgd", "adam"}) {
    auto m = make("simplenet_cifar");
    m->train();
    std::unique_ptr<torch::optim::Optimizer> o;
    if (opt == "sgd")
      o = std::make_unique<torch::optim::SGD>(m->parameters(),
                                              torch::optim::SGDOptions(0.01).momentum(0.9));
    else
      o = std::make_unique<torch::optim::Adam>(m->parameters(), torch::optim::AdamOptions(1e-3));
    auto step = [&] {
      torch::manual_seed(2);
      o->zero_grad();
      m->forward(torch::randn({4, 3, 32, 32})).pow(2).mean().backward();
      o->step();
    };
    step();
    auto g = graph_of(m);
    for (int64_t c : {0, 3}) zero_filter(m, g, "conv1", c);
    MaskTable masks;
    masks["conv1.weight"] = torch::ones({6, 3, 5, 5});
    masks["conv1.bias"] = torch::ones({6});
    auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
    ASSERT_FALSE(plan.empty());
    thin_for_training(*m, plan.recipe, o.get(), &masks);
    EXPECT_EQ(masks["conv1.weight"].sizes(), (std::vector<int64_t>{4, 3, 5, 5}));
    EXPECT_EQ(masks["conv1.bias"].size(0), 4);
    EXPECT_EQ(m->named_parameters()["conv1.weight"].grad().size(0), 4);
    EXPECT_NO_THROW(step()) << opt;  // the state matches the new shapes
    auto& state = o->state();
    auto key = c10::guts::to_string(m->named_parameters()["conv2.weight"].unsafeGetTensorImpl());
    ASSERT_TRUE(state.count(key)) << opt;
    if (opt == "sgd") {
      EXPECT_EQ(static_cast<torch::optim::SGDParamState&>(*state[key]).momentum_buffer().size(1),
                4);
    } else {
      auto& s = static_cast<torch::optim::AdamParamState&>(*state[key]);
      EXPECT_EQ(s.exp_avg().size(1), 4);
      EXPECT_EQ(s.exp_avg_sq().size(1), 4);
    }
  }
}

TEST(Thinning, ReplayOntoAModelOfAnotherShapeIsAnInputError) {
  auto m = make("simplenet_cifar");
  auto g = graph_of(m);
  zero_filter(m, g, "conv1", 1);
  auto plan = plan_thinning(*m, g, ThinningKind::kFilters);
  auto other = make("resnet20_cifar");
  EXPECT_THROW(apply_thinning_recipe(*other, plan.recipe, "x.ckpt"), InputError);
  auto lenet = make("lenet5");
  try {
    apply_thinning_recipe(*lenet, plan.recipe, "x.ckpt");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.ckpt"), std::string::npos) << e.what();
  }
}

// A schedule naming one conv of a residual group: the pruner prunes the whole group, so the
// thinning that follows can remove the channels from every tied layer.
TEST(Thinning, APrunerNamingOneConvOfAResidualGroupPrunesTheWholeGroup) {
  auto m = make("resnet20_cifar");
  m->to(torch::kDouble);
  m->train();
  const std::string text =
      "version: 1\npruners:\n  p:\n    class: L1RankedStructureParameterPruner\n    reg_regims:\n"
      "      layer1.0.conv2.weight: [0.25, Filters]\nextensions:\n  t:\n    class: FilterRemover\n"
      "    thinning_func_str: remove_filters\npolicies:\n  - pruner: {instance_name: p}\n    "
      "epochs: [0]\n"
      "  - extension: {instance_name: t}\n    epochs: [0]\n";
  auto sched = CompressionScheduler::from_text(text, "group.yaml", *m, 0.1, nullptr);
  sched->set_tracer(m->input_shape(), [m](const torch::Tensor& x) { return m->forward(x); });
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  sched->on_epoch_begin(0, opt);
  auto groups = build_channel_groups(*m, graph_of(m));
  EXPECT_EQ(groups->partners("layer1.0.conv2.weight"),
            (std::vector<std::string>{"conv1", "layer1.1.conv2", "layer1.2.conv2", "layer2.0.conv2",
                                      "layer2.1.conv2", "layer2.2.conv2", "layer3.0.conv2",
                                      "layer3.1.conv2", "layer3.2.conv2"}));
  m->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 3, 32, 32}, torch::kDouble);
  const auto masked = m->forward(x);
  sched->on_minibatch_begin({0, 0, 1}, opt);  // thinning acts at the epoch's first minibatch
  EXPECT_LE((m->forward(x) - masked).abs().max().item<double>(), 1e-9);
  EXPECT_EQ(size_of(m, "layer1.0.conv2.weight", 0), 12);
  EXPECT_EQ(size_of(m, "conv1.weight", 0), 12);
  EXPECT_EQ(size_of(m, "layer1.2.conv2.weight", 0), 12);
  EXPECT_EQ(size_of(m, "layer2.2.conv2.weight", 0), 28);
  EXPECT_EQ(size_of(m, "layer3.0.conv2.weight", 0), 60);
  EXPECT_EQ(size_of(m, "fc.weight", 1), 60);
  EXPECT_EQ(size_of(m, "layer1.0.conv1.weight", 0), 16);  // inside the block: untouched
}

// Li et al. 2016's pruned models, by running the shipped schedules' pruning and thinning epoch.
TEST(Thinning, LiEtAlSchedulesGiveThePublishedMacsAndParameters) {
  struct Case {
    std::string model, file;
    int64_t macs, params;
  };
  for (const auto& c :
       {Case{"resnet56_cifar", "resnet56_filter_rank.yaml", 90'907'264, 735'712},
        Case{"vgg16_cifar", "vgg16_cifar_filter_rank.yaml", 206'279'680, 5'399'690}}) {
    auto m = make(c.model);
    m->train();
    auto sched = CompressionScheduler::from_file(
        std::string(IGB_SOURCE_DIR) + "/schedules/classify/" + c.file, *m, 0.1, nullptr);
    sched->set_tracer(m->input_shape(), [m](const torch::Tensor& x) { return m->forward(x); });
    torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
    sched->on_epoch_begin(0, opt);
    sched->on_minibatch_begin({0, 0, 1}, opt);
    EXPECT_EQ(graph_of(m).total_macs(), c.macs) << c.model;
    EXPECT_EQ(models::count_parameters(*m), c.params) << c.model;
    auto recipes = sched->take_thinning_recipes();
    ASSERT_EQ(recipes.size(), 1u) << c.model;
    EXPECT_EQ(recipes[0]["macs_after"], c.macs);
    EXPECT_TRUE(sched->take_thinning_recipes().empty());
    // The masks follow the thinned shapes, and training goes on.
    for (const auto& [name, mask] : sched->masks())
      EXPECT_EQ(mask.size(0), m->named_parameters()[name].size(0)) << name;
    opt.zero_grad();
    m->forward(torch::randn({2, 3, 32, 32})).sum().backward();
    EXPECT_NO_THROW(opt.step());
  }
}

namespace {

/// Fake-quantizing activation slots made by hand (clipped_linear.py:ClippedLinearQuantization:
/// clamp to [0, 1], 2-bit grid). The first has a quantizer's class name (…ActQuant), the second
/// not, so only the traced FakeQuantize op shows what it does.
class ThinDorefaActQuantImpl : public torch::nn::Module {
 public:
  torch::Tensor forward(const torch::Tensor& x) {
    return at::fake_quantize_per_tensor_affine(at::clamp(x, 0, 1), 1.0 / 3, 0, 0, 3);
  }
};
TORCH_MODULE(ThinDorefaActQuant);
class ThinClippedGridImpl : public torch::nn::Module {
 public:
  torch::Tensor forward(const torch::Tensor& x) {
    return at::fake_quantize_per_tensor_affine(at::clamp(x, 0, 1), 1.0 / 3, 0, 0, 3);
  }
};
TORCH_MODULE(ThinClippedGrid);

/// What plan_thinning (and, with `train`, thin_for_training) says about `m`.
std::string thin_quantized_error(const models::Model& m, bool train) {
  try {
    if (train) {
      thin_for_training(*m, nlohmann::json::object(), nullptr, nullptr);
    } else {
      plan_thinning(*m, graph_of(m), ThinningKind::kFilters);
    }
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// quantizer.py:Quantizer.prepare_model keeps the float copy beside Wq (float_weight) and
// replaces the ReLUs; thinning.py slices only the layers' own weights, so a quantized model is
// refused: thinning comes first, quantization after.
TEST(Thinning, AQuantizedModelIsRefusedNamingItsFirstQuantizedLayer) {
  auto m = make("resnet20_cifar");
  zero_filter(m, graph_of(m), "layer1.0.conv1", 3);
  ASSERT_FALSE(plan_thinning(*m, graph_of(m), ThinningKind::kFilters).empty());
  // Weights: a layer with weight bits (its `weight_bits` buffer).
  auto conv = m->named_modules()["layer2.0.conv1"];
  conv->register_buffer("weight_bits", torch::full({}, 3, torch::kLong));
  EXPECT_EQ(thin_quantized_error(m, false), "layer2.0.conv1 is quantized; thin before quantizing");
  EXPECT_EQ(thin_quantized_error(m, true), "layer2.0.conv1 is quantized; thin before quantizing");
  // 0 bits is a floating-point layer.
  conv->buffers(false)[0].fill_(0);
  EXPECT_EQ(thin_quantized_error(m, false), "");
  // Activations: a quantizer's slot module ...
  auto act = m->named_modules()["layer1.1.relu2"]->as<ActivationImpl>();
  ASSERT_NE(act, nullptr);
  act->replace(torch::nn::AnyModule(ThinDorefaActQuant()));
  EXPECT_EQ(thin_quantized_error(m, false), "layer1.1.relu2 is quantized; thin before quantizing");
  EXPECT_EQ(thin_quantized_error(m, true), "layer1.1.relu2 is quantized; thin before quantizing");
  // ... or any module whose trace holds a fake quantization.
  act->replace(torch::nn::AnyModule(ThinClippedGrid()));
  EXPECT_EQ(thin_quantized_error(m, false), "layer1.1.relu2 is quantized; thin before quantizing");
  act->restore();
  EXPECT_EQ(thin_quantized_error(m, false), "");
}

}  // namespace igb::compress
