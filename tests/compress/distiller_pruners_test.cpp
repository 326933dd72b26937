// Distiller's pruner classes beyond magnitude ranking: L2RankedStructureParameterPruner_AGP,
// SplicingPruner, RandomLevelStructureParameterPruner, BernoulliFilterPruner(_AGP) and the
// activation-ranked filter pruners, each against masks worked out by hand from Distiller's rule.
#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>
#include <torch/optim/sgd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "compress/activation_pruners.h"
#include "compress/channel_groups.h"
#include "compress/pruners.h"
#include "compress/random_pruners.h"
#include "compress/scheduler.h"
#include "compress/splicing_pruner.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

// conv1 [4, 1, 1, 1] → relu1 → conv2 [4, 4, 1, 1] → act2 → spatial mean, on 1×2×2 inputs.
// relu1 is where Distiller reads conv1's activations; conv2 has no "relu2".
struct DpNetImpl : torch::nn::Module {
  DpNetImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 4, 1)));
    relu1 = register_module("relu1", Activation(ActivationKind::kReLU));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 1)));
    act2 = register_module("act2", Activation(ActivationKind::kReLU));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return act2(conv2(relu1(conv1(x)))).mean({2, 3});
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  Activation relu1{nullptr}, act2{nullptr};
};
TORCH_MODULE(DpNet);

YamlReader dp_reader(const std::string& text, const std::string& cls) {
  YamlReader r(YAML::Load(text), "p.yaml", "pruners.p (" + cls + ")");
  r.ignore({"class"});
  return r;
}

template <class F>
void dp_expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; wanted: " << needle;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// A mask of `t`'s shape with the listed filters (dimension 0) zeroed.
at::Tensor dp_zero_filters(const at::Tensor& t, const std::vector<int64_t>& filters) {
  auto m = torch::ones(t.sizes(), torch::kFloat32);
  for (auto f : filters) m.select(0, f).zero_();
  return m;
}

class DistillerPrunersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { register_builtin_pruners(); }
  void SetUp() override {
    torch::manual_seed(0);
    net_ = DpNet();
    params_ = std::make_unique<ModelParams>(*net_);
    auto net = net_;
    params_->set_channel_groups(build_channel_groups(
        *net_,
        graph::SummaryGraph::build(*net_, {1, 1, 2, 2}, [net](const torch::Tensor& x) mutable {
          return net->forward(x);
        })));
  }
  at::Tensor& w(const std::string& name) { return params_->at(name); }
  std::unique_ptr<Pruner> make(const std::string& cls, const std::string& text) {
    auto r = dp_reader(text, cls);
    return pruner_registry().get(cls)("p", r, *params_);
  }
  void expect_round_trip(const Pruner& p) {
    const auto json = p.hyperparams();
    auto again = make(json.at("class").get<std::string>(), json.dump());
    EXPECT_EQ(again->hyperparams(), json) << json.dump();
    EXPECT_EQ(again->targets(), p.targets());
  }
  // conv1 = x·[1, 0, −1, 1] + [0, 0.1, −3, 1.5] per filter, so on the inputs below relu1's
  // channels have known zeros.
  void set_conv1_for_activations() {
    torch::NoGradGuard g;
    w("conv1.weight").copy_(torch::tensor({1.0f, 0.0f, -1.0f, 1.0f}).reshape({4, 1, 1, 1}));
    w("conv1.bias").copy_(torch::tensor({0.0f, 0.1f, -3.0f, 1.5f}));
  }
  // conv2's filters: mean |w| 0.2, 0.3, 0.9, 1.0 and root mean square 0.4, 0.3, 0.9, 1.0.
  void set_conv2_filters() {
    torch::NoGradGuard g;
    auto& c = w("conv2.weight");
    c.zero_();
    c[0][3].fill_(0.8f);
    c[1].fill_(0.3f);
    c[2].fill_(0.9f);
    c[3].fill_(1.0f);
  }
  static at::Tensor x1() { return torch::tensor({1.0f, -1.0f, 2.0f, -2.0f}).reshape({1, 1, 2, 2}); }
  static at::Tensor x2() { return torch::full({1, 1, 2, 2}, -1.0f); }

  DpNet net_{nullptr};
  std::unique_ptr<ModelParams> params_;
  MaskTable masks_;
};

}  // namespace

// distiller/pruning/automated_gradual_pruner.py, L2RankedStructureParameterPruner_AGP: the AGP
// fraction with L2 ranking.
TEST_F(DistillerPrunersTest, L2RankedAgpRanksFiltersByL2AtTheAgpFraction) {
  set_conv2_filters();
  const std::string keys =
      "initial_sparsity: 0.0\nfinal_sparsity: 0.25\ngroup_type: Filters\nweights: conv2.weight";
  auto l2 = make("L2RankedStructureParameterPruner_AGP", keys);
  auto l1 = make("L1RankedStructureParameterPruner_AGP", keys);
  EXPECT_TRUE(l2->needs_range_timing());
  const PolicyTiming t{0, 4, 1, {}};  // span 3: epoch 3 reaches 0.25, floor(0.25·4) = 1 filter
  l2->set_masks(*params_, masks_, 0, t);
  EXPECT_EQ(masks_.count("conv2.weight"), 0u);  // target 0 at the first epoch
  l2->set_masks(*params_, masks_, 3, t);
  // RMS 0.4, 0.3, 0.9, 1.0: filter 1 goes (by mean |w| it would be filter 0); its bias with it.
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), dp_zero_filters(w("conv2.weight"), {1})));
  EXPECT_TRUE(torch::equal(masks_.at("conv2.bias"), dp_zero_filters(w("conv2.bias"), {1})));
  masks_.clear();
  l1->set_masks(*params_, masks_, 3, t);
  EXPECT_TRUE(torch::equal(masks_.at("conv2.weight"), dp_zero_filters(w("conv2.weight"), {0})));
  EXPECT_EQ(l2->hyperparams().at("class"), "L2RankedStructureParameterPruner_AGP");
  expect_round_trip(*l2);
}

// distiller/pruning/splicing_pruner.py, create_mask: thresholds from the first call's mean and
// std of |w|, 0 below the low one, 1 at or above the high one, the previous mask in between.
TEST_F(DistillerPrunersTest, SplicingPrunerPrunesBelowLowSplicesAboveHighKeepsBetween) {
  auto set = [&](std::vector<float> v) {
    torch::NoGradGuard g;
    w("conv1.weight").copy_(torch::tensor(v).reshape({4, 1, 1, 1}));
  };
  auto expect_mask = [&](std::vector<float> v) {
    EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), torch::tensor(v).reshape({4, 1, 1, 1})))
        << masks_.at("conv1.weight").flatten();
  };
  set({1, -2, 3, -4});
  auto p = make("SplicingPruner",
                "sensitivities: {conv1.weight: 0.5}\nlow_thresh_mult: 0.9\nhi_thresh_mult: 1.1");
  const PolicyTiming t{0, 10, 1, {}};
  // |w| = 1, 2, 3, 4: mean 2.5, unbiased std sqrt(5/3) = 1.290994; t = 2.5 + 0.5·1.290994 =
  // 3.145497; low 0.9·t = 2.830947, high 1.1·t = 3.460047.
  p->set_masks(*params_, masks_, 0, t);
  expect_mask({0, 0, 1, 1});      // 3 lies between the thresholds and keeps the initial 1
  set({3.0f, 1.0f, 2.9f, 3.5f});  // the same thresholds (mean and std of the first call)
  p->set_masks(*params_, masks_, 1, t);
  expect_mask({0, 0, 1, 1});  // 3.0 and 2.9 lie between: 0 stays 0, 1 stays 1
  set({3.5f, 1.0f, 2.0f, 3.5f});
  p->set_masks(*params_, masks_, 2, t);
  expect_mask({1, 0, 0, 1});  // 3.5 ≥ high splices filter 0 back; 2.0 < low prunes filter 2
  expect_round_trip(*p);
}

// distiller/pruning/splicing_pruner.py, set_param_mask: with sensitivity_multiplier the
// sensitivity grows as s·((epoch − starting_epoch)·multiplier + 1).
TEST_F(DistillerPrunersTest, SplicingPrunerSensitivityGrowsWithTheEpochs) {
  {
    torch::NoGradGuard g;
    w("conv1.weight").copy_(torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({4, 1, 1, 1}));
  }
  auto p = make("SplicingPruner",
                "sensitivities: {'*': 0.5}\nlow_thresh_mult: 0.9\nhi_thresh_mult: 1.1\n"
                "sensitivity_multiplier: 0.5");
  auto names = params_->names();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(p->targets(), names);  // '*' covers every parameter
  // Epoch 4 of a policy starting at 2: s = 0.5·(2·0.5 + 1) = 1; t = 2.5 + 1.290994 = 3.790994,
  // low 3.411895, high 4.170094: 1, 2 and 3 go, 4 keeps its 1.
  p->set_masks(*params_, masks_, 4, PolicyTiming{2, 10, 1, {}});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"),
                           torch::tensor({0.0f, 0.0f, 0.0f, 1.0f}).reshape({4, 1, 1, 1})));
  dp_expect_input_error(
      [&] { make("SplicingPruner", "sensitivities: {conv1.weight: 0.5}\nlow_thresh_mult: 0.9"); },
      "hi_thresh_mult");
}

// distiller/pruning/ranked_structures_pruner.py, RandomLevelStructureParameterPruner: a fraction
// drawn uniformly from sparsity_range for each weight at each call, then L1 ranking.
TEST_F(DistillerPrunersTest, RandomLevelPrunerDrawsAFractionPerWeightAndRanksByL1) {
  set_conv2_filters();
  auto p = make("RandomLevelStructureParameterPruner",
                "group_type: Filters\nsparsity_range: [0.5, 0.74]\nweights: [conv2.weight]");
  // Any fraction in [0.5, 0.74] prunes floor(4f) = 2 filters: mean |w| 0.2 and 0.3.
  for (int64_t seed = 0; seed < 5; ++seed) {
    torch::manual_seed(seed);
    masks_.clear();
    p->set_masks(*params_, masks_, 0, {});
    EXPECT_TRUE(
        torch::equal(masks_.at("conv2.weight"), dp_zero_filters(w("conv2.weight"), {0, 1})));
  }
  expect_round_trip(*p);
  // Over [0, 1) the count follows the run's generator: f = u, k = floor(4u), u the next double.
  auto wide = make("RandomLevelStructureParameterPruner",
                   "group_type: Filters\nsparsity_range: [0.0, 1.0]\nweights: [conv2.weight]");
  for (int64_t seed = 0; seed < 6; ++seed) {
    torch::manual_seed(seed);
    const double u = torch::rand({1}, torch::kFloat64).item<double>();
    const auto k = static_cast<int64_t>(std::floor(4 * u));
    torch::manual_seed(seed);
    masks_.clear();
    wide->set_masks(*params_, masks_, 0, {});
    std::vector<int64_t> expected;
    for (int64_t f = 0; f < k; ++f) expected.push_back(f);  // filters rank 0 < 1 < 2 < 3
    if (k == 0)
      EXPECT_EQ(masks_.count("conv2.weight"), 0u);
    else
      EXPECT_TRUE(
          torch::equal(masks_.at("conv2.weight"), dp_zero_filters(w("conv2.weight"), expected)))
          << "seed " << seed << " u " << u;
  }
  dp_expect_input_error(
      [&] {
        make("RandomLevelStructureParameterPruner",
             "group_type: Filters\nsparsity_range: [0.5, 0.7]\ndesired_sparsity: 0.5\n"
             "weights: [conv2.weight]");
      },
      "unknown key 'desired_sparsity'");
  dp_expect_input_error(
      [&] {
        make("RandomLevelStructureParameterPruner",
             "group_type: Filters\nsparsity_range: [0.5]\nweights: [conv2.weight]");
      },
      "two numbers");
}

// distiller/pruning/ranked_structures_pruner.py, BernoulliFilterPruner: keep each filter with
// probability 1 − fraction and scale the kept ones by filters / kept.
TEST_F(DistillerPrunersTest, BernoulliPrunerDropsFiltersAndScalesTheKeptOnes) {
  auto p =
      make("BernoulliFilterPruner",
           "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight, conv2.weight]");
  for (int64_t seed = 0; seed < 4; ++seed) {
    // The same draws as the pruner's: one Bernoulli(0.5) per filter, weight by weight.
    torch::manual_seed(seed);
    const auto keep1 = torch::bernoulli(torch::full({4}, 0.5f));
    const auto keep2 = torch::bernoulli(torch::full({4}, 0.5f));
    torch::manual_seed(seed);
    masks_.clear();
    p->set_masks(*params_, masks_, 0, {});
    const std::vector<std::pair<std::string, at::Tensor>> draws = {{"conv1.weight", keep1},
                                                                   {"conv2.weight", keep2}};
    for (const auto& [name, keep] : draws) {
      const float kept = keep.sum().item<float>();
      const auto& m = masks_.at(name);
      for (int64_t f = 0; f < 4; ++f) {
        const float want = keep[f].item<float>() == 1.0f ? 4.0f / kept : 0.0f;
        EXPECT_TRUE(torch::allclose(m[f], torch::full_like(m[f], want))) << name << " " << seed;
      }
    }
    EXPECT_EQ(masks_.count("conv1.bias"), 0u);  // the weight alone
  }
  // Fraction 1 drops every filter: zeros, not Distiller's 0/0.
  auto all = make("BernoulliFilterPruner",
                  "group_type: Filters\ndesired_sparsity: 1.0\nweights: conv1.weight");
  all->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), torch::zeros({4, 1, 1, 1})));
  // Fraction 0 leaves the masks alone.
  masks_.clear();
  make("BernoulliFilterPruner", "group_type: Filters\ndesired_sparsity: 0\nweights: conv1.weight")
      ->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(masks_.empty());
  expect_round_trip(*p);
  dp_expect_input_error(
      [&] {
        make("BernoulliFilterPruner",
             "group_type: Channels\ndesired_sparsity: 0.5\nweights: conv1.weight");
      },
      "valid: Filters, 3D");
}

// distiller/pruning/automated_gradual_pruner.py, BernoulliFilterPruner_AGP; with Leader one draw
// serves every weight.
TEST_F(DistillerPrunersTest, BernoulliAgpFollowsTheAgpFractionAndLeaderSharesTheDraw) {
  auto p = make("BernoulliFilterPruner_AGP",
                "initial_sparsity: 0.0\nfinal_sparsity: 0.5\ngroup_type: 3D\n"
                "weights: [conv1.weight, conv2.weight]\ngroup_dependency: Leader");
  EXPECT_TRUE(p->needs_range_timing());
  const PolicyTiming t{0, 3, 1, {}};  // span 2: epoch 1 → 0.5 + (0 − 0.5)·0.5³ = 0.4375
  torch::manual_seed(3);
  const auto keep = torch::bernoulli(torch::full({4}, 1.0f - 0.4375f));
  torch::manual_seed(3);
  p->set_masks(*params_, masks_, 1, t);
  const float kept = keep.sum().item<float>();
  for (const char* name : {"conv1.weight", "conv2.weight"})
    for (int64_t f = 0; f < 4; ++f)
      EXPECT_TRUE(torch::allclose(
          masks_.at(name)[f],
          torch::full_like(masks_.at(name)[f], keep[f].item<float>() == 1.0f ? 4.0f / kept : 0.0f)))
          << name;
  masks_.clear();
  p->set_masks(*params_, masks_, 0, t);  // target 0 at the first epoch: no masks
  EXPECT_TRUE(masks_.empty());
  expect_round_trip(*p);
}

// Distiller's DropFilter example (docs/algo_pruning.md, PruningPolicy in distiller/policy.py): with
// use_double_copies, mask_on_forward_only and discard_masks_at_minibatch_end the scaled mask acts
// on the forward pass only and the step updates the dense weights.
TEST_F(DistillerPrunersTest, BernoulliMasksScaleTheForwardPassOnlyUnderDoubleCopies) {
  const std::string text =
      "version: 1\npruners:\n  drop:\n    class: BernoulliFilterPruner\n"
      "    group_type: Filters\n    desired_sparsity: 0.5\n    weights: [conv1.weight]\n"
      "policies:\n  - pruner:\n      instance_name: drop\n      args: "
      "{mini_batch_pruning_frequency: "
      "1, discard_masks_at_minibatch_end: true, use_double_copies: true, mask_on_forward_only: "
      "true}\n    epochs: [0]\n";
  auto sched = CompressionScheduler::from_text(text, "s.yaml", *net_, 0.1, nullptr);
  torch::optim::SGD opt(net_->parameters(), torch::optim::SGDOptions(0.0));
  const auto dense = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({4, 1, 1, 1});
  {
    torch::NoGradGuard g;
    w("conv1.weight").copy_(dense);
  }
  torch::manual_seed(5);
  const auto keep = torch::bernoulli(torch::full({4}, 0.5f));
  const float kept = keep.sum().item<float>();
  torch::manual_seed(5);
  sched->on_epoch_begin(0, opt);  // the first draw
  const MinibatchInfo info{0, 0, 2};
  sched->on_minibatch_begin(info, opt);
  // Forward pass: each kept filter scaled by 4 / kept, the dropped ones zero.
  EXPECT_TRUE(
      torch::allclose(w("conv1.weight"), dense * keep.reshape({4, 1, 1, 1}) * (4.0f / kept)))
      << w("conv1.weight").flatten() << keep;
  sched->before_parameter_optimization(info, opt);
  EXPECT_TRUE(torch::equal(w("conv1.weight"), dense));  // the step sees the dense weights
  sched->on_minibatch_end(info, opt);
  EXPECT_TRUE(sched->masks().empty());  // discarded
  EXPECT_TRUE(torch::equal(w("conv1.weight"), dense));
}

// distiller/utils.py activation_channels_apoz and activation_channels_means, summarised per batch
// and averaged over batches (SummaryActivationStatsCollector's AverageValueMeter).
TEST_F(DistillerPrunersTest, ActivationStatisticsAverageEachBatchsApozAndMean) {
  set_conv1_for_activations();
  auto p = make("ActivationAPoZRankedFilterPruner",
                "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]");
  auto stats = ActivationStatisticsImpl::attach(*net_->relu1);
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->batches(), 0);
  net_->train();
  // Batch A = {x1, x2}. x1 = [1, −1, 2, −2] gives relu1 channels [1,0,2,0], [.1]*4, 0s,
  // [2.5,.5,3.5,0]; x2 = −1s gives 0s, [.1]*4, 0s, [.5]*4. Non-zero shares: x1 .5, 1, 0, .75;
  // x2 0, 1, 0, 1. APoZ_A = 100 − 100·mean = 75, 0, 100, 12.5; mean_A = .375, .1, 0, 1.0625.
  net_->forward(torch::cat({x1(), x2()}));
  // Batch B = {x1}: APoZ 50, 0, 100, 25; mean .75, .1, 0, 1.625.
  net_->forward(x1());
  EXPECT_EQ(stats->batches(), 2);
  // Each batch counts once: APoZ (75 + 50)/2 = 62.5, 0, 100, 18.75 (weighting by samples would
  // give 66.7 for channel 0); mean .5625, .1, 0, 1.34375.
  EXPECT_TRUE(
      torch::allclose(stats->apoz(), torch::tensor({62.5, 0.0, 100.0, 18.75}, torch::kFloat64)))
      << stats->apoz();
  EXPECT_TRUE(
      torch::allclose(stats->mean(), torch::tensor({0.5625, 0.1, 0.0, 1.34375}, torch::kFloat64)))
      << stats->mean();
  // Validation (eval mode) adds nothing; the next training batch starts a new epoch's sums.
  net_->eval();
  net_->forward(x1());
  EXPECT_EQ(stats->batches(), 2);
  net_->train();
  net_->forward(x2());
  EXPECT_EQ(stats->batches(), 1);
  EXPECT_TRUE(
      torch::allclose(stats->apoz(), torch::tensor({100.0, 0.0, 100.0, 0.0}, torch::kFloat64)));
  // The observer changes nothing in the output: relu(conv1) as before.
  EXPECT_TRUE(torch::equal(net_->relu1(torch::tensor({-1.0f, 2.0f})), torch::tensor({0.0f, 2.0f})));
  EXPECT_EQ(ActivationRankedFilterPruner::activation_name("layer1.0.conv1.weight"),
            "layer1.0.relu1");
  EXPECT_EQ(ActivationRankedFilterPruner::activation_name("conv1.weight"), "relu1");
  EXPECT_EQ(ActivationRankedFilterPruner::activation_name("module.conv.conv2.weight"),
            "module.relu.relu2");
}

// distiller/pruning/ranked_structures_pruner.py, ActivationRankedFilterPruner: APoZ prunes the
// filters whose activations are most often zero; Mean prunes the lowest means (Distiller's code
// prunes the highest, see docs/schedules.md).
TEST_F(DistillerPrunersTest, ActivationPrunersRankFiltersByTheirReluStatistics) {
  set_conv1_for_activations();
  const std::string keys = "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]";
  auto apoz = make("ActivationAPoZRankedFilterPruner", keys);
  auto mean = make("ActivationMeanRankedFilterPruner", keys);
  // Before any training batch there is nothing to rank by.
  dp_expect_input_error([&] { apoz->set_masks(*params_, masks_, 0, {}); },
                        "no activation statistics of relu1");
  net_->train();
  net_->forward(torch::cat({x1(), x2()}));
  net_->forward(x1());
  // APoZ 62.5, 0, 100, 18.75: floor(0.5·4) = 2 go, filters 2 and 0, with their biases.
  apoz->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), dp_zero_filters(w("conv1.weight"), {0, 2})));
  EXPECT_TRUE(torch::equal(masks_.at("conv1.bias"), dp_zero_filters(w("conv1.bias"), {0, 2})));
  // Means .5625, .1, 0, 1.34375: filters 2 and 1 go.
  masks_.clear();
  mean->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), dp_zero_filters(w("conv1.weight"), {1, 2})));
  EXPECT_EQ(apoz->filter_targets(), std::vector<std::string>({"conv1.weight"}));
  expect_round_trip(*apoz);
  expect_round_trip(*mean);
  // In a data-parallel job the ranking reads the job's statistics: here a reducer that averages
  // this rank's APoZ (62.5, 0, 100, 18.75) with another rank's (0, 90, 0, 80) gives 31.25, 45,
  // 50, 49.375, so filters 2 and 3 go instead of 2 and 0.
  auto* ranked = dynamic_cast<ActivationRankedFilterPruner*>(apoz.get());
  ASSERT_NE(ranked, nullptr);
  ranked->set_reducer([](const at::Tensor& local) {
    return (local + torch::tensor({0.0, 90.0, 0.0, 80.0}, local.options())) / 2;
  });
  masks_.clear();
  apoz->set_masks(*params_, masks_, 0, {});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), dp_zero_filters(w("conv1.weight"), {2, 3})));
  // AGP: span 2, epoch 1 → 0.5 + (0.25 − 0.5)·0.125 = 0.46875 → floor(1.875) = 1: filter 2.
  auto agp = make("ActivationAPoZRankedFilterPruner_AGP",
                  "initial_sparsity: 0.25\nfinal_sparsity: 0.5\ngroup_type: Filters\n"
                  "weights: [conv1.weight]");
  masks_.clear();
  agp->set_masks(*params_, masks_, 1, PolicyTiming{0, 3, 1, {}});
  EXPECT_TRUE(torch::equal(masks_.at("conv1.weight"), dp_zero_filters(w("conv1.weight"), {2})));
  expect_round_trip(*agp);
  // conv2 would be read from "relu2", which the model does not have.
  dp_expect_input_error(
      [&] {
        make("ActivationMeanRankedFilterPruner_AGP",
             "initial_sparsity: 0.1\nfinal_sparsity: 0.5\ngroup_type: Filters\n"
             "weights: [conv2.weight]");
      },
      "module 'relu2'");
}

// distiller/apputils/image_classifier.py: on_epoch_begin prunes before the epoch's training
// collectors reset, so an activation pruner at epoch 1 ranks by epoch 0's training batches.
TEST_F(DistillerPrunersTest, ActivationPrunerInAScheduleRanksByThePreviousEpochsBatches) {
  set_conv1_for_activations();
  const std::string text =
      "version: 1\npruners:\n  apoz:\n    class: ActivationAPoZRankedFilterPruner\n"
      "    group_type: Filters\n    desired_sparsity: 0.5\n    weights: [conv1.weight]\n"
      "policies:\n  - pruner:\n      instance_name: apoz\n    epochs: [1]\n";
  auto sched = CompressionScheduler::from_text(text, "s.yaml", *net_, 0.1, nullptr);
  auto net = net_;
  sched->set_tracer({1, 1, 2, 2},
                    [net](const torch::Tensor& x) mutable { return net->forward(x); });
  torch::optim::SGD opt(net_->parameters(), torch::optim::SGDOptions(0.0));
  net_->train();
  sched->on_epoch_begin(0, opt);  // no policy at epoch 0
  for (const auto& batch : {torch::cat({x1(), x2()}), x1()}) net_->forward(batch);
  net_->eval();
  net_->forward(x2());  // validation
  net_->train();
  sched->on_epoch_begin(1, opt);
  EXPECT_TRUE(
      torch::equal(sched->masks().at("conv1.weight"), dp_zero_filters(w("conv1.weight"), {0, 2})));
}

TEST_F(DistillerPrunersTest, EachClassRefusesAnUnknownKeyAndNamesTheLine) {
  const std::map<std::string, std::string> valid = {
      {"L2RankedStructureParameterPruner_AGP",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv2.weight]"},
      {"SplicingPruner",
       "sensitivities: {conv1.weight: 0.5}\nlow_thresh_mult: 0.9\nhi_thresh_mult: 1.1"},
      {"RandomLevelStructureParameterPruner",
       "group_type: Channels\nsparsity_range: [0.1, 0.5]\nweights: [conv2.weight]"},
      {"BernoulliFilterPruner",
       "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]"},
      {"BernoulliFilterPruner_AGP",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv1.weight]"},
      {"ActivationAPoZRankedFilterPruner",
       "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]"},
      {"ActivationAPoZRankedFilterPruner_AGP",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv1.weight]"},
      {"ActivationMeanRankedFilterPruner",
       "group_type: Filters\ndesired_sparsity: 0.5\nweights: [conv1.weight]"},
      {"ActivationMeanRankedFilterPruner_AGP",
       "initial_sparsity: 0\nfinal_sparsity: 0.5\ngroup_type: Filters\nweights: [conv1.weight]"}};
  for (const auto& [cls, keys] : valid) {
    auto p = make(cls, keys);
    EXPECT_EQ(p->hyperparams().at("class"), cls);
    expect_round_trip(*p);
    const auto line = std::to_string(std::count(keys.begin(), keys.end(), '\n') + 2);
    dp_expect_input_error([&, cls = cls, keys = keys] { make(cls, keys + "\nsparsity: 0.5"); },
                          "p.yaml:" + line + ": unknown key 'sparsity' in pruners.p (" + cls + ")");
  }
}

}  // namespace igb::compress
