// Pruners (and the regularizers' options): from_yaml reads values and defaults and refuses unknown
// keys, each class's masks follow its rule on hand-built weights, and the resolved configuration
// (hyperparams) loads back into the same object.
#include "compress/pruners.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "compress/channel_groups.h"
#include "compress/regularizers.h"
#include "compress/scheduler.h"
#include "core/error.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

// conv1 [4, 3, 3, 3] → bn1 → conv2 [4, 4, 1, 1] → fc [3, 4], on a 3×3 input.
struct TinyNetImpl : torch::nn::Module {
  TinyNetImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(4));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 1)));
    fc = register_module("fc", torch::nn::Linear(4, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc(torch::relu(conv2(bn1(conv1(x)))).flatten(1));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(TinyNet);

// A reader for `text` as the mapping of instance p of `cls`, as the scheduler makes it.
YamlReader reader(const std::string& text, const std::string& cls,
                  const std::string& section = "pruners") {
  YamlReader r(YAML::Load(text), "p.yaml", section + ".p (" + cls + ")");
  r.ignore({"class"});
  return r;
}

template <class F>
void expect_input_error(F&& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted: " << needles.front();
  } catch (const InputError& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nwanted: " << n;
  }
}

class PrunersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    register_builtin_pruners();
    register_builtin_regularizers();
  }
  void SetUp() override {
    torch::manual_seed(0);
    net_ = TinyNet();
    params_ = std::make_unique<ModelParams>(*net_);
    auto net = net_;
    params_->set_channel_groups(build_channel_groups(
        *net_,
        graph::SummaryGraph::build(*net_, {1, 3, 3, 3}, [net](const torch::Tensor& x) mutable {
          return net->forward(x);
        })));
    // conv1: magnitudes 1..108, each once, in shuffled positions with random signs.
    torch::NoGradGuard g;
    auto magnitude = torch::randperm(108, torch::kInt64).to(torch::kFloat32) + 1;
    auto sign = torch::randint(0, 2, {108}).to(torch::kFloat32) * 2 - 1;
    net_->conv1->weight.copy_((magnitude * sign).reshape({4, 3, 3, 3}));
  }
  at::Tensor& w(const std::string& name) { return params_->at(name); }
  std::unique_ptr<Pruner> make(const std::string& cls, const std::string& text) {
    auto r = reader(text, cls);
    return pruner_registry().get(cls)("p", r, *params_);
  }
  // Builds a pruner from its own hyperparams() and checks it says the same again.
  void expect_round_trip(const Pruner& p) {
    const auto json = p.hyperparams();
    const auto cls = json.at("class").get<std::string>();
    auto again = make(cls, json.dump());
    EXPECT_EQ(again->hyperparams(), json) << json.dump();
    EXPECT_EQ(again->targets(), p.targets());
  }

  TinyNet net_{nullptr};
  std::unique_ptr<ModelParams> params_;
  MaskTable masks_;
};

// A mask of `w`'s shape zeroing the listed slices along `dim`.
at::Tensor zeroing(const at::Tensor& w, int64_t dim, const std::vector<int64_t>& slices) {
  auto m = torch::ones(w.sizes(), torch::kFloat32);
  for (auto i : slices) m.select(dim, i).zero_();
  return m;
}

}  // namespace

TEST_F(PrunersTest, LevelPrunerReadsLevelsAndExpandsTheStar) {
  auto r = reader("levels: {module.conv1.weight: 0.3, '*': 0.25}", "SparsityLevelParameterPruner");
  auto o = LevelPrunerOptions::from_yaml(r, *params_);
  // '*' covers every parameter, biases and BatchNorm terms included, as Distiller's
  // SparsityLevelParameterPruner.set_param_mask is called for each of model.named_parameters()
  // and takes levels.get(name, levels['*']) (distiller/pruning/level_pruner.py, policy.py).
  const ParamValues expected = {{"conv1.weight", 0.3}, {"conv1.bias", 0.25},   {"bn1.weight", 0.25},
                                {"bn1.bias", 0.25},    {"conv2.weight", 0.25}, {"conv2.bias", 0.25},
                                {"fc.weight", 0.25},   {"fc.bias", 0.25}};
  EXPECT_EQ(o.levels(), expected);
  EXPECT_TRUE(LevelPrunerOptions().levels().empty());

  expect_input_error(
      [&] {
        auto r = reader("levels: {conv1.weight: 1.5}", "SparsityLevelParameterPruner");
        LevelPrunerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:1:", "pruners.p (SparsityLevelParameterPruner).levels = 1.500000 is not in [0, 1]"});
  expect_input_error(
      [&] {
        auto r = reader("levels: {}", "SparsityLevelParameterPruner");
        LevelPrunerOptions::from_yaml(r, *params_);
      },
      {"needs a non-empty mapping 'levels'"});
  expect_input_error(
      [&] {
        auto r = reader("levels: {conv9.weight: 0.5}", "SparsityLevelParameterPruner");
        LevelPrunerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:1:", "'conv9.weight' is not a parameter", "conv1.weight"});
}

TEST_F(PrunersTest, LevelPrunerZeroesExactlyTheFloorSNSmallest) {
  LevelPruner p("p", LevelPrunerOptions({{"conv1.weight", 0.3}}));
  p.set_masks(*params_, masks_, 0, {});
  // floor(0.3 · 108) = 32: exactly magnitudes 1..32.
  EXPECT_TRUE(
      torch::equal(masks_.at("conv1.weight"), w("conv1.weight").abs().gt(32).to(torch::kFloat32)));
  EXPECT_EQ(masks_.at("conv1.weight").eq(0).sum().item<int64_t>(), 32);
  EXPECT_EQ(p.targets(), std::vector<std::string>{"conv1.weight"});
  EXPECT_EQ(p.hyperparams(), nlohmann::json::parse(R"({"class": "SparsityLevelParameterPruner",
                                                      "levels": {"conv1.weight": 0.3}})"));
  expect_round_trip(p);
}

TEST_F(PrunersTest, MagnitudePrunerZeroesAtOrBelowTheThreshold) {
  auto p = make("MagnitudeParameterPruner", "thresholds: {conv1.weight: 10}");
  p->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(
      torch::equal(masks_.at("conv1.weight"), w("conv1.weight").abs().gt(10).to(torch::kFloat32)));
  EXPECT_EQ(masks_.at("conv1.weight").eq(0).sum().item<int64_t>(), 10);  // |w| = 1..10, 10 included
  // thresholds.get(name, thresholds['*']) for every parameter
  // (distiller/pruning/magnitude_pruner.py).
  auto r = reader("thresholds: {'*': 2.5}", "MagnitudeParameterPruner");
  ParamValues all;
  for (const auto& n : params_->names()) all[n] = 2.5;
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(MagnitudePrunerOptions::from_yaml(r, *params_).thresholds(), all);
  expect_round_trip(*p);
}

// Distiller's threshold_mask is |w| > t (distiller/thresholding.py): weights at exactly t go,
// and weights already zero stay pruned even at t = 0.
TEST_F(PrunersTest, MagnitudePrunerPrunesTiesAtTheThreshold) {
  {
    torch::NoGradGuard g;
    w("fc.weight")
        .copy_(torch::tensor(
            {{0.f, 0.5f, -0.5f, 0.25f}, {-0.75f, 0.f, 0.5f, 1.f}, {0.5f, -0.25f, 2.f, 0.f}}));
  }
  make("MagnitudeParameterPruner", "thresholds: {fc.weight: 0.5}")
      ->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(
      masks_.at("fc.weight"),
      torch::tensor({{0.f, 0.f, 0.f, 0.f}, {1.f, 0.f, 0.f, 1.f}, {0.f, 0.f, 1.f, 0.f}})));
  make("MagnitudeParameterPruner", "thresholds: {fc.weight: 0}")
      ->set_masks(*params_, masks_, 0, {});
  EXPECT_EQ(masks_.at("fc.weight").eq(0).sum().item<int64_t>(), 3);  // the three zeros
}

// A '*' level reaches a bias and a BatchNorm weight (Distiller prunes every named parameter).
TEST_F(PrunersTest, LevelPrunerStarPrunesBiasesAndNormTerms) {
  {
    torch::NoGradGuard g;
    w("bn1.weight").copy_(torch::tensor({0.3f, -0.1f, 0.4f, 0.2f}));
    w("fc.bias").copy_(torch::tensor({-1.f, 0.5f, 2.f}));
  }
  auto p = make("SparsityLevelParameterPruner", "levels: {'*': 0.5}");
  p->set_masks(*params_, masks_, 0, {});
  // bn1.weight: k = floor(0.5 · 4) = 2, threshold 0.2: -0.1 and 0.2 go.
  EXPECT_TRUE(torch::equal(masks_.at("bn1.weight"), torch::tensor({1.f, 0.f, 1.f, 0.f})));
  // fc.bias: k = floor(0.5 · 3) = 1, threshold 0.5.
  EXPECT_TRUE(torch::equal(masks_.at("fc.bias"), torch::tensor({1.f, 0.f, 1.f})));
  EXPECT_EQ(p->targets().size(), 8u);
}

TEST_F(PrunersTest, SensitivityPrunerThresholdIsSensitivityTimesStd) {
  auto p = make("SensitivityPruner", "sensitivities: {conv1.weight: 0.5}");
  p->set_masks(*params_, masks_, 0, {});
  // std of ±1..±108 computed independently: unbiased, in double.
  auto v = w("conv1.weight").flatten().to(torch::kFloat64);
  const double mean = v.mean().item<double>();
  const double var = (v - mean).pow(2).sum().item<double>() / 107.0;
  const double threshold = 0.5 * std::sqrt(var);
  const auto expected =
      w("conv1.weight").abs().to(torch::kFloat64).gt(threshold).to(torch::kFloat32);
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), expected));
  EXPECT_EQ(masks_.at("conv1.weight").eq(0).sum().item<int64_t>(),
            static_cast<int64_t>(std::floor(threshold)));
  expect_round_trip(*p);
}

// Distiller's SensitivityPruner takes torch.std(param) once, at its first call, and keeps it
// (distiller/pruning/sensitivity_pruner.py: `if not hasattr(param, 'stddev')`).
TEST_F(PrunersTest, SensitivityPrunerKeepsTheStdOfItsFirstCall) {
  // conv2.weight holds ±1, ±2, …, ±8: mean 0, Σw² = 2·(1 + 4 + … + 64) = 408, unbiased
  // std = sqrt(408 / 15) = 5.2154; sensitivity 1 → threshold 5.2154 prunes ±1..±5 (10 of 16).
  {
    torch::NoGradGuard g;
    auto v = torch::arange(1, 9, torch::kFloat32);
    w("conv2.weight").copy_(torch::cat({v, -v}).reshape({4, 4, 1, 1}));
  }
  auto p = make("SensitivityPruner", "sensitivities: {conv2.weight: 1.0}");
  p->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(
      torch::equal(masks_.at("conv2.weight"), w("conv2.weight").abs().gt(5.5).to(torch::kFloat32)));
  // Masked, and training moves the 8 to 5: the values are 10 zeros, ±6, ±7, 5, −8. Their std
  // would be sqrt((259 − 16·0.1875²)/15) = 4.151, which keeps the 5; the kept threshold 5.2154
  // prunes it.
  {
    torch::NoGradGuard g;
    w("conv2.weight").mul_(masks_.at("conv2.weight"));
    w("conv2.weight").view(-1)[7] = 5.0f;  // was 8
  }
  p->set_masks(*params_, masks_, 1, {});
  EXPECT_EQ(masks_.at("conv2.weight").eq(0).sum().item<int64_t>(), 11);
  EXPECT_EQ(masks_.at("conv2.weight").view(-1)[7].item<float>(), 0.0f);
}

TEST_F(PrunersTest, AgpPrunerReadsItsKeysAndNeedsARange) {
  auto r = reader(
      "initial_sparsity: 0.05\nfinal_sparsity: 0.6\nweights: [conv1.weight, module.fc.weight]",
      "AutomatedGradualPruner");
  auto o = AgpPrunerOptions::from_yaml(r, *params_);
  EXPECT_DOUBLE_EQ(o.initial_sparsity(), 0.05);
  EXPECT_DOUBLE_EQ(o.final_sparsity(), 0.6);
  EXPECT_EQ(o.weights(), (std::vector<std::string>{"conv1.weight", "fc.weight"}));
  EXPECT_TRUE(AgpPruner("p", o).needs_range_timing());

  expect_input_error(
      [&] { make("AutomatedGradualPruner", "initial_sparsity: 0.1\nweights: [conv1.weight]"); },
      {"p.yaml:1:", "pruners.p (AutomatedGradualPruner) is missing the key 'final_sparsity'"});
  expect_input_error(
      [&] {
        make("AutomatedGradualPruner", "initial_sparsity: 0.1\nfinal_sparsity: 0.5\nweights: []");
      },
      {"p.yaml:1:", "needs a non-empty list 'weights'"});
  expect_input_error(
      [&] {
        make("AutomatedGradualPruner",
             "initial_sparsity: 0.1\nfinal_sparsity: -0.5\nweights: [conv1.weight]");
      },
      {"p.yaml:2:", "final_sparsity = -0.500000 is not in [0, 1]"});
}

TEST_F(PrunersTest, AgpPrunerFollowsTheCubicTargetAtScheduledEpochs) {
  AgpPruner p("p", AgpPrunerOptions(0.0, 0.5, {"conv1.weight"}));
  // start 0, end 10, frequency 2: span = ((10 − 0 − 1) // 2) · 2 = 8.
  const PolicyTiming t{0, 10, 2, {}};
  // target(e) = 0.5 − 0.5 · (1 − e/8)³; zeros = floor(target · 108).
  const std::vector<std::pair<int64_t, int64_t>> zeros = {
      {0, 0}, {2, 31}, {4, 47}, {6, 53}, {8, 54}};
  for (const auto& [epoch, n] : zeros) {
    EXPECT_NEAR(agp_target(0.0, 0.5, epoch, t), 0.5 - 0.5 * std::pow(1 - epoch / 8.0, 3), 1e-12);
    p.set_masks(*params_, masks_, epoch, t);
    EXPECT_TRUE(
        torch::equal(masks_.at("conv1.weight"), w("conv1.weight").abs().gt(n).to(torch::kFloat32)))
        << "epoch " << epoch << ": wanted magnitudes 1.." << n << " zeroed";
  }
  expect_round_trip(p);
}

TEST_F(PrunersTest, RankedPrunerReadsBothFormsAndChecksThem) {
  auto r = reader(
      "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight, conv2.weight]\n"
      "group_dependency: Leader",
      "L1RankedStructureParameterPruner");
  auto o = RankedStructurePrunerOptions::from_yaml(r, *params_);
  ASSERT_EQ(o.targets().size(), 2u);
  EXPECT_EQ(o.targets()[1].weight, "conv2.weight");
  EXPECT_DOUBLE_EQ(o.targets()[1].fraction, 0.5);
  EXPECT_EQ(o.targets()[1].group, GroupType::kFilters);
  EXPECT_TRUE(o.leader());
  EXPECT_FALSE(o.agp());
  EXPECT_EQ(o.norm(), RankNorm::kL1);

  auto r2 = reader("reg_regims: {conv1.weight: [0.25, 3D], conv2.weight: [0.75, Channels]}",
                   "L2RankedStructureParameterPruner");
  auto o2 = RankedStructurePrunerOptions::from_yaml(r2, *params_);
  ASSERT_EQ(o2.targets().size(), 2u);
  EXPECT_DOUBLE_EQ(o2.targets()[0].fraction, 0.25);
  EXPECT_EQ(o2.targets()[0].group, GroupType::kFilters);
  EXPECT_DOUBLE_EQ(o2.targets()[1].fraction, 0.75);
  EXPECT_EQ(o2.targets()[1].group, GroupType::kChannels);
  EXPECT_FALSE(o2.leader());
  EXPECT_EQ(make("L2RankedStructureParameterPruner", "reg_regims: {conv1.weight: [0.25, 3D]}")
                ->hyperparams()
                .at("class"),
            "L2RankedStructureParameterPruner");

  const std::string cls = "L1RankedStructureParameterPruner";
  expect_input_error(
      [&] { make(cls, "group_type: Kernels\ndesired_sparsity: 0.5\nweights: [conv1.weight]"); },
      {"p.yaml:1:",
       "group_type 'Kernels' is not a group type; valid: Filters, 3D, Channels, Rows, Blocks"});
  expect_input_error(
      [&] { make(cls, "group_type: Rows\ndesired_sparsity: 0.5\nweights: [conv1.weight]"); },
      {"Rows pruning needs a 2-D (linear) weight, but conv1.weight has 4 dimensions"});
  expect_input_error(
      [&] {
        make(cls,
             "group_type: Filters\ndesired_sparsity: 0.5\nweights: "
             "[conv1.weight]\ngroup_dependency: X");
      },
      {"p.yaml:4:", "group_dependency 'X' is unknown; valid: Leader"});
  expect_input_error(
      [&] {
        make(cls,
             "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight, fc.weight]\n"
             "group_dependency: Leader");
      },
      {"Leader needs the same number of groups in every weight, but fc.weight differs from "
       "conv1.weight"});
  expect_input_error(
      [&] { make(cls, "reg_regims: {conv1.weight: [0.5, Filters]}\ndesired_sparsity: 0.5"); },
      {"gives both reg_regims and weights/desired_sparsity"});
  expect_input_error([&] { make(cls, "reg_regims: {conv1.weight: 0.5}"); },
                     {"p.yaml:1:", "reg_regims entries are [fraction, group_type]"});
}

TEST_F(PrunersTest, L1RankedFilterPrunerZeroesTheFiltersOfSmallestL1Norm) {
  {
    torch::NoGradGuard g;
    auto cw = w("conv1.weight");
    const std::vector<float> mean_abs = {0.4f, -0.1f, 0.3f, 0.2f};
    for (int64_t f = 0; f < 4; ++f) cw[f].fill_(mean_abs[f]);
    cw[2][0].neg_();  // the sign does not count
  }
  auto p = make("L1RankedStructureParameterPruner",
                "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]");
  p->set_masks(*params_, masks_, 0, {});
  // floor(0.5 · 4) = 2 filters: 1 (0.1) and 3 (0.2).
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1, 3})));
  EXPECT_EQ(p->filter_targets(), std::vector<std::string>{"conv1.weight"});
  EXPECT_FALSE(p->needs_range_timing());
  expect_round_trip(*p);
}

TEST_F(PrunersTest, L1AndL2RankDifferently) {
  // Filter 0: 14 × 0.6 and 13 zeros (mean |w| 0.311, RMS 0.432); filter 1: all 0.35 (mean and
  // RMS 0.35); filters 2 and 3 all 1. L1 prunes filter 0, L2 filter 1.
  {
    torch::NoGradGuard g;
    auto cw = w("conv1.weight");
    cw.fill_(1.0);
    cw[0].view(-1).copy_(
        torch::tensor({0.6f, 0.f}).repeat(14).slice(0, 0, 27));  // 14 × 0.6, 13 zeros
    cw[1].fill_(0.35);
  }
  const std::string keys = "group_type: Filters\ndesired_sparsity: 0.25\nweights: [conv1.weight]";
  make("L1RankedStructureParameterPruner", keys)->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {0})));
  masks_.clear();
  make("L2RankedStructureParameterPruner", keys)->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1})));
}

TEST_F(PrunersTest, L1RankedChannelPrunerZeroesTheChannelsOfSmallestL1Norm) {
  {
    torch::NoGradGuard g;
    auto cw = w("conv2.weight");  // [4 filters, 4 input channels, 1, 1]
    const std::vector<float> mean_abs = {0.5f, 0.2f, 0.1f, 0.4f};
    for (int64_t c = 0; c < 4; ++c) cw.select(1, c).fill_(mean_abs[c]);
    cw[3][1].fill_(-0.2f);
  }
  auto p = make("L1RankedStructureParameterPruner",
                "group_type: Channels\ndesired_sparsity: 0.5\nweights: [conv2.weight]");
  p->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), zeroing(w("conv2.weight"), 1, {1, 2})));
  EXPECT_TRUE(p->filter_targets().empty());  // channels take no filter group with them
  expect_round_trip(*p);
}

// Distiller's ranked `Rows` on a 2-D weight ranks and zeroes input columns
// (rank_and_prune_rows → cols_norm, expand_binary_map 'Cols'; distiller/pruning/
// ranked_structures_pruner.py): the output rows and the bias stay.
TEST_F(PrunersTest, RankedRowsOnALinearWeightZeroesInputColumns) {
  {
    torch::NoGradGuard g;
    // Column means of |w|: 0.4, 0.1, 0.3, 0.2 (row means all 0.25).
    w("fc.weight")
        .copy_(torch::tensor(
            {{0.4f, 0.1f, 0.3f, 0.2f}, {-0.4f, 0.1f, 0.3f, -0.2f}, {0.4f, -0.1f, -0.3f, 0.2f}}));
  }
  auto p = make("L1RankedStructureParameterPruner",
                "group_type: Rows\ndesired_sparsity: 0.5\nweights: [fc.weight]");
  p->set_masks(*params_, masks_, 0, {});
  // floor(0.5 · 4) = 2 columns: 1 (0.1) and 3 (0.2).
  EXPECT_TRUE(torch::equal(masks_.at("fc.weight"), zeroing(w("fc.weight"), 1, {1, 3})));
  EXPECT_EQ(masks_.count("fc.bias"), 0u);
  EXPECT_TRUE(p->filter_targets().empty());
  expect_round_trip(*p);
}

// Distiller's ranked pruners assign `zeros_mask_dict[param_name].mask = mask` on each call
// (distiller/pruning/ranked_structures_pruner.py): the new mask replaces the old one, so on dense
// weights the pruned set moves; the filters' channel group (bias, BatchNorm) moves with it.
TEST_F(PrunersTest, RankedPrunerReplacesItsMaskOnEachCall) {
  auto set_filters = [&](const std::vector<float>& mean_abs) {
    torch::NoGradGuard g;
    for (int64_t f = 0; f < 4; ++f) w("conv1.weight")[f].fill_(mean_abs[f]);
  };
  auto p = make("L1RankedStructureParameterPruner",
                "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]");
  set_filters({0.4f, 0.1f, 0.3f, 0.2f});
  p->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1, 3})));
  EXPECT_TRUE(torch::equal(masks_.at("bn1.weight"), zeroing(w("bn1.weight"), 0, {1, 3})));
  // Dense weights (as under use_double_copies) now rank filters 0 and 2 lowest.
  set_filters({0.05f, 0.9f, 0.3f, 0.8f});
  p->set_masks(*params_, masks_, 1, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {0, 2})));
  EXPECT_TRUE(torch::equal(masks_.at("conv1.bias"), zeroing(w("conv1.bias"), 0, {0, 2})));
  EXPECT_TRUE(torch::equal(masks_.at("bn1.weight"), zeroing(w("bn1.weight"), 0, {0, 2})));
  EXPECT_TRUE(torch::equal(masks_.at("bn1.bias"), zeroing(w("bn1.bias"), 0, {0, 2})));
}

// Distiller's rank_and_prune_blocks (distiller/pruning/ranked_structures_pruner.py): block_shape
// [R, D, 1, 1]; with D > 1 the weight is viewed as [F·C/(R·D), R·D, kH·kW] and a block is R·D
// consecutive kernels at one position; with D = 1 as [F/R, R, C·kH·kW], R filters at one place.
TEST_F(PrunersTest, RankedBlocksFollowDistillersBlockShape) {
  const std::string cls = "L1RankedStructureParameterPruner";
  {
    torch::NoGradGuard g;
    // conv2 [4, 4, 1, 1] as 16 kernels; blocks of 2: means 1, 0.1, 2, 0.2, 3, 0.3, 4, 0.05.
    w("conv2.weight")
        .view(-1)
        .copy_(torch::tensor({1.f, 1.f, 0.1f, 0.1f, 2.f, 2.f, 0.2f, -0.2f, 3.f, 3.f, 0.3f, 0.3f,
                              4.f, 4.f, 0.05f, 0.05f}));
  }
  auto p = make(cls,
                "group_type: Blocks\ndesired_sparsity: 0.375\nweights: [conv2.weight]\n"
                "kwargs: {block_shape: [1, 2, 1, 1]}");
  p->set_masks(*params_, masks_, 0, {});
  // k = floor(0.375 · 8) = 3, threshold 0.2: blocks 7, 1, 3, i.e. kernels 14, 15, 2, 3, 6, 7.
  auto expected = torch::ones({16});
  for (int64_t i : {2, 3, 6, 7, 14, 15}) expected[i] = 0.f;
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), expected.view({4, 4, 1, 1})));
  EXPECT_EQ(p->hyperparams().at("kwargs"),
            nlohmann::json::parse(R"({"block_shape": [1, 2, 1, 1]})"));
  expect_round_trip(*p);

  {
    torch::NoGradGuard g;
    // Blocks of 2 filters at each channel: filters {0, 1} at channel 1 (mean 0.1) and filters
    // {2, 3} at channel 3 (mean 0.2) are the smallest of 8 blocks.
    auto cw = w("conv2.weight");
    cw.fill_(1.f);
    cw[0][1].fill_(0.1f);
    cw[1][1].fill_(0.1f);
    cw[2][3].fill_(0.2f);
    cw[3][3].fill_(-0.2f);
  }
  masks_.clear();
  make(cls,
       "group_type: Blocks\ndesired_sparsity: 0.25\nweights: [conv2.weight]\n"
       "kwargs: {block_shape: [2, 1, 1, 1]}")
      ->set_masks(*params_, masks_, 0, {});
  auto m2 = torch::ones({4, 4, 1, 1});
  m2[0][1] = 0.f;
  m2[1][1] = 0.f;
  m2[2][3] = 0.f;
  m2[3][3] = 0.f;
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), m2));  // k = floor(0.25 · 8) = 2

  // The _AGP class takes kwargs too (Distiller's docstring example, on a weight of 16 kernels).
  auto agp = make("L1RankedStructureParameterPruner_AGP",
                  "initial_sparsity: 0.05\nfinal_sparsity: 0.70\ngroup_type: Blocks\n"
                  "weights: [conv2.weight]\nkwargs:\n  block_shape: [1, 4, 1, 1]");
  expect_round_trip(*agp);

  const std::string keys = "group_type: Blocks\ndesired_sparsity: 0.5\nweights: [conv1.weight]";
  expect_input_error([&] { make(cls, keys); },
                     {"group_type Blocks needs kwargs: {block_shape: [repetitions, depth, 1, 1]}"});
  expect_input_error(
      [&] {
        make(cls,
             "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]\nkwargs: "
             "{block_shape: [1, 2, 1, 1]}");
      },
      {"p.yaml:4:", "kwargs.block_shape is for group_type Blocks"});
  expect_input_error([&] { make(cls, keys + "\nkwargs: {block_shape: [1, 2, 3, 1]}"); },
                     {"p.yaml:4:", "must be [repetitions, depth, 1, 1]"});
  expect_input_error(
      [&] { make(cls, keys + "\nkwargs: {block_shape: [1, 5, 1, 1]}"); },
      {"conv1.weight [4, 3, 3, 3]: blocks of 5 kernels do not tile the 4×3 kernels"});
  expect_input_error([&] { make(cls, keys + "\nkwargs: {block_shape: [3, 1, 1, 1]}"); },
                     {"blocks of 3 filters do not tile the weight's 4 filters"});
  expect_input_error([&] { make(cls, keys + "\nkwargs: {block_shape: [1, 2]}"); },
                     {"block_shape has 2 values"});
  expect_input_error([&] { make(cls, keys + "\nkwargs: {block_shape: [1, 2, 1, 1], size: 3}"); },
                     {"unknown key 'size'"});
  expect_input_error(
      [&] {
        make(cls,
             "group_type: Blocks\ndesired_sparsity: 0.5\nweights: [fc.weight]\nkwargs: "
             "{block_shape: [1, 2, 1, 1]}");
      },
      {"Blocks pruning needs a 4-D (conv) weight"});
}

// Under mask_on_forward_only with use_double_copies the weights stay dense between forward passes
// (Distiller's ParameterMasker keeps an unmasked copy and the policy restores it before the step),
// so the ranked pruner's next call ranks dense weights and its new mask replaces the old one.
TEST_F(PrunersTest, RankedPrunerReRanksDenseWeightsUnderDoubleCopies) {
  const std::string text =
      "version: 1\npruners:\n  p:\n    class: L1RankedStructureParameterPruner\n"
      "    group_type: Filters\n    desired_sparsity: 0.5\n    weights: [conv1.weight]\n"
      "policies:\n  - pruner:\n      instance_name: p\n      args: {mask_on_forward_only: true, "
      "use_double_copies: true}\n    epochs: [0, 1]\n";
  auto sched = CompressionScheduler::from_text(text, "s.yaml", *net_, 0.1, nullptr);
  auto net = net_;
  sched->set_tracer({1, 3, 3, 3},
                    [net](const torch::Tensor& x) mutable { return net->forward(x); });
  torch::optim::SGD opt(net_->parameters(), torch::optim::SGDOptions(0.1));
  auto set_filters = [&](const std::vector<float>& mean_abs) {
    torch::NoGradGuard g;
    for (int64_t f = 0; f < 4; ++f) w("conv1.weight")[f].fill_(mean_abs[f]);
  };
  set_filters({0.4f, 0.1f, 0.3f, 0.2f});
  sched->on_epoch_begin(0, opt);
  EXPECT_TRUE(
      torch::equal(sched->masks().at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1, 3})));
  const MinibatchInfo info{0, 0, 1};
  sched->on_minibatch_begin(info, opt);
  EXPECT_EQ(w("conv1.weight")[1].abs().sum().item<float>(), 0.0f);  // masked for the forward pass
  sched->before_parameter_optimization(info, opt);
  EXPECT_FLOAT_EQ(w("conv1.weight")[1][0][0][0].item<float>(), 0.1f);  // dense again for the step
  set_filters({0.05f, 0.9f, 0.3f, 0.8f});  // what the step made of the dense weights
  sched->on_minibatch_end(info, opt);
  sched->on_epoch_end(0, {}, opt);
  sched->on_epoch_begin(1, opt);
  // floor(0.5 · 4) = 2 of the dense filters: 0 (0.05) and 2 (0.3); filters 1 and 3 come back.
  EXPECT_TRUE(
      torch::equal(sched->masks().at("conv1.weight"), zeroing(w("conv1.weight"), 0, {0, 2})));
  EXPECT_FLOAT_EQ(w("conv1.weight")[1][0][0][0].item<float>(), 0.9f);
}

// Distiller's `fold_batchnorm` policy arg (policy.py, PruningPolicy._fold_batchnorm): conv1's
// filters are ranked on w·γ/√(running_var + ε) of bn1, the BatchNorm after it, so filter 0 (the
// smallest weights, the largest γ) survives; the mask zeroes the unfolded weights. Without the
// arg the same pruner drops filter 0.
TEST_F(PrunersTest, FoldBatchnormRanksFiltersOnTheirBatchNormFoldedWeights) {
  const std::vector<float> mean_abs = {0.1f, 0.4f, 0.3f, 0.2f}, gamma = {8, 1, 1, 1},
                           var = {1, 1, 4, 1};
  // By hand: the folded L1 norm of filter f is 27·a_f·γ_f/√(var_f + ε); the two smallest go.
  std::vector<std::pair<double, int64_t>> folded;
  for (int64_t f = 0; f < 4; ++f)
    folded.emplace_back(27 * mean_abs[f] * gamma[f] / std::sqrt(var[f] + 1e-5), f);
  std::sort(folded.begin(), folded.end());
  std::vector<int64_t> expected = {folded[0].second, folded[1].second};
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(expected, (std::vector<int64_t>{2, 3}));
  for (const bool fold : {true, false}) {
    SCOPED_TRACE(fold ? "fold_batchnorm: true" : "no fold_batchnorm");
    {
      torch::NoGradGuard g;
      for (int64_t f = 0; f < 4; ++f) {
        w("conv1.weight")[f].fill_(mean_abs[f]);
        net_->bn1->weight[f].fill_(gamma[f]);
        net_->bn1->running_var[f].fill_(var[f]);
      }
    }
    const std::string text =
        "version: 1\npruners:\n  p:\n    class: L1RankedStructureParameterPruner\n"
        "    group_type: Filters\n    desired_sparsity: 0.5\n    weights: [conv1.weight]\n"
        "policies:\n  - pruner:\n      instance_name: p\n      args: {fold_batchnorm: " +
        std::string(fold ? "true" : "false") + "}\n    epochs: [0]\n";
    auto sched = CompressionScheduler::from_text(text, "s.yaml", *net_, 0.1, nullptr);
    auto net = net_;
    sched->set_tracer({1, 3, 3, 3},
                      [net](const torch::Tensor& x) mutable { return net->forward(x); });
    torch::optim::SGD opt(net_->parameters(), torch::optim::SGDOptions(0.1));
    sched->on_epoch_begin(0, opt);
    const std::vector<int64_t> dropped = fold ? expected : std::vector<int64_t>{0, 3};
    EXPECT_TRUE(
        torch::equal(sched->masks().at("conv1.weight"), zeroing(w("conv1.weight"), 0, dropped)));
    // The kept filters keep their own (unfolded) weights.
    const int64_t kept = fold ? 0 : 2;
    EXPECT_FLOAT_EQ(w("conv1.weight")[kept][0][0][0].item<float>(), mean_abs[kept]);
    EXPECT_EQ(w("conv1.weight")[dropped[0]].abs().sum().item<float>(), 0.0f);
  }
}

TEST_F(PrunersTest, LeaderAppliesTheFirstWeightsChoiceToAll) {
  {
    torch::NoGradGuard g;
    const std::vector<float> first = {0.1f, 0.9f, 0.8f, 0.2f}, second = {0.9f, 0.1f, 0.2f, 0.8f};
    for (int64_t f = 0; f < 4; ++f) {
      w("conv1.weight")[f].fill_(first[f]);
      w("conv2.weight")[f].fill_(second[f]);
    }
  }
  const std::string keys =
      "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight, conv2.weight]";
  auto leader = make("L1RankedStructureParameterPruner", keys + "\ngroup_dependency: Leader");
  leader->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {0, 3})));
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), zeroing(w("conv2.weight"), 0, {0, 3})));
  expect_round_trip(*leader);
  masks_.clear();
  make("L1RankedStructureParameterPruner", keys)->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"),
                           zeroing(w("conv2.weight"), 0, {1, 2})));  // its own choice
}

TEST_F(PrunersTest, RankedAgpPrunerPrunesTheAgpFractionOfFilters) {
  {
    torch::NoGradGuard g;
    const std::vector<float> mean_abs = {0.4f, 0.1f, 0.3f, 0.2f};
    for (int64_t f = 0; f < 4; ++f) w("conv1.weight")[f].fill_(mean_abs[f]);
  }
  auto r = reader(
      "initial_sparsity: 0.0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv1.weight]",
      "L1RankedStructureParameterPruner_AGP");
  auto o = RankedStructurePrunerOptions::from_yaml_agp(r, *params_);
  EXPECT_TRUE(o.agp());
  EXPECT_DOUBLE_EQ(o.initial_sparsity(), 0.0);
  EXPECT_DOUBLE_EQ(o.final_sparsity(), 0.5);
  RankedStructurePruner p("p", o);
  EXPECT_TRUE(p.needs_range_timing());
  const PolicyTiming t{0, 10, 2, {}};  // span 8
  // floor(4 · target): epoch 2 → 0.289 → 1 filter; epoch 0 → 0; epoch 8 → 2.
  // At epoch 0 nothing is pruned and, as in Distiller (prune_group returns early), no mask is set.
  p.set_masks(*params_, masks_, 0, t);
  EXPECT_EQ(masks_.count("conv1.weight"), 0u);
  p.set_masks(*params_, masks_, 2, t);
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1})));
  masks_.clear();
  p.set_masks(*params_, masks_, 8, t);
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), zeroing(w("conv1.weight"), 0, {1, 3})));
  EXPECT_EQ(p.hyperparams().at("class"), "L1RankedStructureParameterPruner_AGP");
  expect_round_trip(p);
}

TEST_F(PrunersTest, EveryPrunerClassRefusesAnUnknownKeyNamingFileAndLine) {
  const std::map<std::string, std::string> valid = {
      {"SparsityLevelParameterPruner", "levels: {conv1.weight: 0.5}"},
      {"MagnitudeParameterPruner", "thresholds: {conv1.weight: 0.5}"},
      {"SensitivityPruner", "sensitivities: {conv1.weight: 0.5}"},
      {"AutomatedGradualPruner",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\nweights: [conv1.weight]"},
      {"L1RankedStructureParameterPruner",
       "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]"},
      {"L2RankedStructureParameterPruner",
       "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]"},
      {"L1RankedStructureParameterPruner_AGP",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv1.weight]"}};
  // Plus the nine classes tested in distiller_pruners_test.cpp.
  EXPECT_EQ(pruner_registry().names().size(), valid.size() + 9);
  for (const auto& [cls, keys] : valid) {
    auto p = make(cls, keys);
    EXPECT_EQ(p->hyperparams().at("class"), cls);
    expect_round_trip(*p);
    const auto line = std::to_string(std::count(keys.begin(), keys.end(), '\n') + 2);
    expect_input_error(
        [&, cls = cls, keys = keys] { make(cls, keys + "\nsparsity: 0.5"); },
        {"p.yaml:" + line + ":", "unknown key 'sparsity' in pruners.p (" + cls + "); valid keys:"});
  }
}

// --- regularizers --------------------------------------------------------------------------------

TEST_F(PrunersTest, RegularizerOptionsReadKeysInFileOrderAndRoundTrip) {
  auto r = reader("reg_regims: {conv2.weight: 0.01, module.conv1.weight: 0.02}", "L1Regularizer",
                  "regularizers");
  auto o = L1RegularizerOptions::from_yaml(r, *params_);
  ASSERT_EQ(o.reg_regims().size(), 2u);
  EXPECT_EQ(o.reg_regims()[0].param, "conv2.weight");
  EXPECT_DOUBLE_EQ(o.reg_regims()[0].strength, 0.01);
  EXPECT_EQ(o.reg_regims()[1].param, "conv1.weight");
  EXPECT_EQ(o.threshold_criteria(), ThresholdCriterion::kNone);
  L1Regularizer l1("l1", o);
  EXPECT_FALSE(l1.has_threshold());
  EXPECT_NEAR(l1.loss(*params_).item<double>(),
              0.01 * w("conv2.weight").abs().sum().item<double>() +
                  0.02 * w("conv1.weight").abs().sum().item<double>(),
              1e-3);

  auto r2 = reader(
      "reg_regims: {conv1.weight: [0.5, Filters], fc.weight: [0.1, Cols]}\nthreshold_criteria: Max",
      "GroupLassoRegularizer", "regularizers");
  auto o2 = GroupLassoRegularizerOptions::from_yaml(r2, *params_);
  ASSERT_EQ(o2.reg_regims().size(), 2u);
  EXPECT_EQ(o2.reg_regims()[0].group, LassoGroup::k3D);
  EXPECT_EQ(o2.reg_regims()[1].group, LassoGroup::kCols);
  EXPECT_EQ(o2.threshold_criteria(), ThresholdCriterion::kMax);
  GroupLassoRegularizer gl("gl", o2);
  EXPECT_EQ(gl.hyperparams(), nlohmann::json::parse(R"({"class": "GroupLassoRegularizer",
      "reg_regims": {"conv1.weight": [0.5, "3D"], "fc.weight": [0.1, "Cols"]}, "threshold_criteria": "Max"})"));

  for (const Regularizer* reg :
       {static_cast<const Regularizer*>(&l1), static_cast<const Regularizer*>(&gl)}) {
    const auto json = reg->hyperparams();
    const auto cls = json.at("class").get<std::string>();
    auto rr = reader(json.dump(), cls, "regularizers");
    EXPECT_EQ(regularizer_registry().get(cls)("r", rr, *params_)->hyperparams(), json);
  }

  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {conv1.weight: [0.5, Kernels]}", "GroupLassoRegularizer");
        GroupLassoRegularizerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:1:",
       "group 'Kernels' is unknown; valid: 2D, 3D, Filters, 4D, Channels, Rows, Cols, Rows+Cols, "
       "Channels+4D"});
  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {conv1.weight: [0.5, Rows]}", "GroupLassoRegularizer");
        GroupLassoRegularizerOptions::from_yaml(r, *params_);
      },
      {"group Rows needs a 2-D weight"});
  expect_input_error(
      [&] {
        auto r =
            reader("reg_regims: {conv1.weight: 0.1}\nthreshold_criteria: Min", "L1Regularizer");
        L1RegularizerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:2:", "threshold_criteria 'Min' is unknown; valid: Mean_Abs, Max"});
  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {conv1.weight: 0.1}\nthreshold: Max", "L1Regularizer");
        L1RegularizerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:2:", "unknown key 'threshold'"});
}

// Distiller's GroupLassoRegularizer.loss (distiller/regularization/group_regularizer.py): the
// overlapping groups 'Rows+Cols' (or 'Cols+Rows') add the row-wise and column-wise terms,
// 'Channels+4D' (or '4D+Channels') the channel-wise and whole-layer terms; group_threshold_mask
// accepts neither, so neither takes threshold_criteria.
TEST_F(PrunersTest, GroupLassoCombinedGroupsAddTheirPartsTerms) {
  {
    torch::NoGradGuard g;
    w("fc.weight")
        .copy_(torch::tensor({{3.f, 4.f, 0.f, 0.f}, {0.f, 0.f, 6.f, 8.f}, {0.f, 0.f, 0.f, 0.f}}));
    // conv2 [4, 4, 1, 1]: input channels (columns of W[f][c]) with L2 norms 5, 10, 1, 2.
    w("conv2.weight")
        .view({4, 4})
        .copy_(torch::tensor({{3.f, 0.f, 1.f, 0.f},
                              {4.f, 0.f, 0.f, 2.f},
                              {0.f, 6.f, 0.f, 0.f},
                              {0.f, 8.f, 0.f, 0.f}}));
  }
  auto r = reader("reg_regims: {fc.weight: [0.01, Cols+Rows], conv2.weight: [0.1, 4D+Channels]}",
                  "GroupLassoRegularizer", "regularizers");
  auto o = GroupLassoRegularizerOptions::from_yaml(r, *params_);
  ASSERT_EQ(o.reg_regims().size(), 2u);
  EXPECT_EQ(o.reg_regims()[0].group, LassoGroup::kRowsCols);
  EXPECT_EQ(o.reg_regims()[1].group, LassoGroup::kChannels4D);
  GroupLassoRegularizer gl("gl", o);
  // fc rows: 5 + 10 + 0 = 15, columns: 3 + 4 + 6 + 8 = 21, so 0.01 · 36 = 0.36.
  // conv2 channels: 5 + 10 + 1 + 2 = 18, whole tensor sqrt(9 + 16 + 36 + 64 + 1 + 4) = sqrt(130),
  // so 0.1 · (18 + 11.401754) = 2.9401754.
  EXPECT_NEAR(gl.loss(*params_).item<double>(), 0.36 + 0.1 * (18 + std::sqrt(130.0)), 1e-5);
  EXPECT_EQ(gl.hyperparams(), nlohmann::json::parse(R"({"class": "GroupLassoRegularizer",
      "reg_regims": {"fc.weight": [0.01, "Rows+Cols"], "conv2.weight": [0.1, "Channels+4D"]}})"));

  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {fc.weight: [0.01, Rows+Cols]}\nthreshold_criteria: Max",
                        "GroupLassoRegularizer", "regularizers");
        GroupLassoRegularizerOptions::from_yaml(r, *params_);
      },
      {"p.yaml:2:", "group Rows+Cols of fc.weight cannot be thresholded"});
  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {conv1.weight: [0.01, Rows+Cols]}", "GroupLassoRegularizer",
                        "regularizers");
        GroupLassoRegularizerOptions::from_yaml(r, *params_);
      },
      {"group Rows+Cols needs a 2-D weight"});
  expect_input_error(
      [&] {
        auto r = reader("reg_regims: {fc.weight: [0.01, Channels+4D]}", "GroupLassoRegularizer",
                        "regularizers");
        GroupLassoRegularizerOptions::from_yaml(r, *params_);
      },
      {"group Channels+4D needs a 4-D convolution weight"});
}

TEST_F(PrunersTest, GroupLassoThresholdMasksChannelsBelowTheStrength) {
  {
    torch::NoGradGuard g;
    auto cw = w("conv2.weight");
    const std::vector<float> mean_abs = {0.5f, 0.05f, 0.2f, 0.01f};
    for (int64_t c = 0; c < 4; ++c) cw.select(1, c).fill_(mean_abs[c]);
  }
  GroupLassoRegularizer gl(
      "gl", GroupLassoRegularizerOptions({{"conv2.weight", 0.1, LassoGroup::kChannels}})
                .threshold_criteria(ThresholdCriterion::kMeanAbs));
  gl.threshold(*params_, masks_);
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), zeroing(w("conv2.weight"), 1, {1, 3})));
}

}  // namespace igb::compress
