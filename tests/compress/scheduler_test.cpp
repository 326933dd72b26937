#include "compress/scheduler.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "models/model.h"

namespace igb::compress {

namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { models::register_builtin_models(); }
  void SetUp() override {
    torch::manual_seed(0);
    fsrcnn_ = models::create_model("fsrcnn", {});
    resnet_ = models::create_model("resnet20_cifar", {});
  }
  // Expects an InputError whose message contains every needle.
  void expect_error(const std::string& yaml, torch::nn::Module& model,
                    const std::vector<std::string>& needles) {
    try {
      CompressionScheduler::from_text(yaml, "s.yaml", model, 0.1, nullptr);
      FAIL() << "no error for:\n" << yaml;
    } catch (const InputError& e) {
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos)
            << e.what() << "\nwanted: " << n;
    }
  }
  // The scheduler as the trainer sets it up: with the model's tracer, so filter pruning follows
  // the summary graph's channel groups.
  static std::unique_ptr<CompressionScheduler> traced(std::unique_ptr<CompressionScheduler> s,
                                                      const models::Model& m) {
    s->set_tracer(m->input_shape(), [m](const torch::Tensor& x) { return m->forward(x); });
    return s;
  }
  models::Model fsrcnn_, resnet_;
};

const char* kAgp = R"(version: 1
pruners:
  p:
    class: AutomatedGradualPruner
    initial_sparsity: 0.1
    final_sparsity: 0.6
    weights: [mid_part.1.weight, mid_part.3.weight]
policies:
  - pruner:
      instance_name: p
    starting_epoch: 0
    ending_epoch: 4
    frequency: 1
)";

std::string python_tool_schedule(const std::string& name) {
  return std::string(IGB_SOURCE_DIR) + "/tests/fixtures/python_tool_schedules/" + name;
}

}  // namespace

TEST_F(SchedulerTest, PythonToolSchedulesLoadUnchangedOnFsrcnn) {
  for (const char* f : {"agp_prune.yaml", "filter_prune.yaml"}) {
    auto s =
        traced(CompressionScheduler::from_file(python_tool_schedule(f), *fsrcnn_, 0.001, nullptr),
               fsrcnn_);
    EXPECT_EQ(s->named_params().size(), 6u) << f;
  }
  // filter_prune.yaml's reg_regims form: 40% of mid_part.1's 12 filters is 4.
  auto s = traced(CompressionScheduler::from_file(python_tool_schedule("filter_prune.yaml"),
                                                  *fsrcnn_, 0.001, nullptr),
                  fsrcnn_);
  torch::optim::SGD opt(fsrcnn_->parameters(), 0.001);
  {
    torch::NoGradGuard g;  // FSRCNN starts with zero biases; make pruned ones distinguishable
    fsrcnn_->named_parameters()["mid_part.1.bias"].uniform_(0.1, 1.0);
  }
  s->on_epoch_begin(0, opt);
  auto w = fsrcnn_->named_parameters()["mid_part.1.weight"];
  EXPECT_EQ(w.flatten(1).abs().sum(1).eq(0).sum().item<int64_t>(), 4);
  EXPECT_EQ(fsrcnn_->named_parameters()["mid_part.1.bias"].eq(0).sum().item<int64_t>(), 4);
}

TEST_F(SchedulerTest, AgpMasksGrowAndStayThroughMomentumSteps) {
  auto s = CompressionScheduler::from_text(kAgp, "s.yaml", *fsrcnn_, 0.1, nullptr);
  torch::optim::SGD opt(fsrcnn_->parameters(),
                        torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
  auto w = fsrcnn_->named_parameters()["mid_part.1.weight"];  // 12·12·9 = 1296
  double last = 0;
  for (int64_t epoch = 0; epoch < 6; ++epoch) {
    s->on_epoch_begin(epoch, opt);
    for (int64_t b = 0; b < 3; ++b) {
      MinibatchInfo info{epoch, b, 3};
      s->on_minibatch_begin(info, opt);
      auto loss = fsrcnn_->forward(torch::rand({2, 1, 8, 8})).pow(2).mean();
      loss = s->before_backward_pass(info, loss, opt);
      opt.zero_grad();
      loss.backward();
      s->before_parameter_optimization(info, opt);
      opt.step();
      s->on_minibatch_end(info, opt);
      // Masked weights stay zero after the step, momentum and weight decay notwithstanding.
      auto m = s->masks().at("mid_part.1.weight");
      EXPECT_EQ(w.masked_select(m.eq(0)).abs().sum().item<float>(), 0.0f);
    }
    s->on_epoch_end(epoch, {}, opt);
    double sp = sparsity(w);
    const double expected = epoch < 4 ? agp_target(0.1, 0.6, epoch, {0, 4, 1, {}}) : 0.6;
    EXPECT_EQ(w.eq(0).sum().item<int64_t>(),
              static_cast<int64_t>(std::floor(expected * 1296 + 1e-9)))
        << epoch;
    EXPECT_GE(sp, last);
    last = sp;
  }
  EXPECT_NEAR(last, 0.6, 1.0 / 1296);
  auto scalars = s->epoch_scalars();
  ASSERT_EQ(scalars.size(), 3u);
  EXPECT_EQ(scalars[1].column, "sparsity/mid_part.1.weight");
  EXPECT_EQ(scalars[1].tag, "sparsity/weights/mid_part.1.weight");
}

TEST_F(SchedulerTest, FilterPruningZeroesBiasAndFollowingBatchNorm) {
  const char* yaml = R"(version: 1
pruners:
  f:
    class: L1RankedStructureParameterPruner
    group_type: Filters
    desired_sparsity: 0.5
    weights: [module.layer1.0.conv1.weight, layer1.1.conv1.weight]
    group_dependency: Leader
policies:
  - pruner: {instance_name: f}
    epochs: [0]
)";
  auto s = traced(CompressionScheduler::from_text(yaml, "s.yaml", *resnet_, 0.1, nullptr), resnet_);
  torch::optim::SGD opt(resnet_->parameters(), 0.1);
  {
    torch::NoGradGuard g;
    for (auto& p : resnet_->named_parameters())
      if (p.key().find("bn") != std::string::npos) p.value().uniform_(0.5, 1.5);
  }
  s->on_epoch_begin(0, opt);
  auto p = resnet_->named_parameters();
  auto f0 = p["layer1.0.conv1.weight"].flatten(1).abs().sum(1).eq(0);
  auto f1 = p["layer1.1.conv1.weight"].flatten(1).abs().sum(1).eq(0);
  EXPECT_EQ(f0.sum().item<int64_t>(), 8);
  EXPECT_TRUE(torch::equal(f0, f1));  // Leader: one choice for both
  EXPECT_TRUE(torch::equal(p["layer1.0.bn1.weight"].eq(0), f0));
  EXPECT_TRUE(torch::equal(p["layer1.0.bn1.bias"].eq(0), f0));
  EXPECT_EQ(p["layer1.0.bn2.weight"].eq(0).sum().item<int64_t>(), 0);
}

TEST_F(SchedulerTest, ValidationErrorsNameFileLineAndChoices) {
  expect_error("version: 1\nprunerz: {}\npolicies: []\n", *fsrcnn_,
               {"s.yaml:2:", "unknown top-level key 'prunerz'", "pruners"});
  expect_error("version: 1\npruners:\n  p:\n    class: AGPPruner\npolicies: []\n", *fsrcnn_,
               {"s.yaml:4:", "unknown pruner class 'AGPPruner'", "AutomatedGradualPruner"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n    initial_sparsity: 0.1\n  "
      "  final_sparsity: 0.5\n"
      "    weights: [mid_part.1.wieght]\npolicies:\n  - pruner: {instance_name: p}\n    "
      "starting_epoch: 0\n    ending_epoch: 2\n",
      *fsrcnn_, {"s.yaml:7:", "'mid_part.1.wieght' is not a parameter", "mid_part.1.weight"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n    initial_sparsity: 0.1\n"
      "    weights: [mid_part.1.weight]\npolicies: []\n",
      *fsrcnn_, {"s.yaml:4:", "missing the key 'final_sparsity'"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n    levels: {'*': "
      "0.5}\n    level: 3\n"
      "policies:\n  - pruner: {instance_name: p}\n    epochs: [0]\n",
      *fsrcnn_, {"s.yaml:6:", "unknown key 'level'", "levels"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n    levels: {'*': "
      "0.5}\n"
      "policies:\n  - pruner: {instance_name: q}\n    epochs: [0]\n",
      *fsrcnn_, {"s.yaml:7:", "no pruner named 'q'", "defined: p"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n    levels: {'*': "
      "0.5}\n"
      "policies:\n  - pruner: {instance_name: p}\n    starting_epoch: 5\n    ending_epoch: 3\n",
      *fsrcnn_, {"s.yaml:9:", "ending_epoch 3 is not after starting_epoch 5"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n    levels: {'*': "
      "0.5}\n"
      "policies:\n  - pruner: {instance_name: p}\n    epochs: []\n",
      *fsrcnn_, {"s.yaml:8:", "epochs list is empty"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n    levels: {'*': "
      "0.5}\n"
      "policies:\n  - pruner: {instance_name: p}\n",
      *fsrcnn_, {"s.yaml:7:", "no timing"});
  expect_error(
      "version: 1\nquantizers:\n  a: {class: DorefaQuantizer}\n  b: {class: "
      "PACTQuantizer}\npolicies: []\n",
      *fsrcnn_, {"s.yaml:3:", "at most one quantizer"});
  expect_error(kAgp + std::string("  - pruner: {instance_name: p}\n    epochs: [1]\n"), *fsrcnn_,
               {"needs starting_epoch/ending_epoch/frequency"});
  expect_error(
      "version: 1\npruners:\n  p:\n    class: L1RankedStructureParameterPruner\n    group_type: "
      "Rows\n"
      "    desired_sparsity: 0.5\n    weights: [mid_part.1.weight]\npolicies:\n  - pruner: "
      "{instance_name: p}\n    epochs: [0]\n",
      *fsrcnn_, {"Rows pruning needs a 2-D (linear) weight"});
}

TEST_F(SchedulerTest, LrSchedulersRegularizersAndState) {
  const char* yaml = R"(version: 1
lr_schedulers:
  lr:
    class: MultiStepMultiGammaLR
    milestones: [1, 3]
    gammas: [0.5, 0.1]
regularizers:
  l1:
    class: L1Regularizer
    reg_regims: {mid_part.1.weight: 0.01}
  gl:
    class: GroupLassoRegularizer
    reg_regims: {mid_part.3.weight: [0.1, 3D]}
policies:
  - lr_scheduler: {instance_name: lr}
    starting_epoch: 0
    ending_epoch: 10
    frequency: 1
  - regularizer: {instance_name: l1}
    epochs: [0]
  - regularizer: {instance_name: gl}
    epochs: [0]
)";
  auto s = CompressionScheduler::from_text(yaml, "s.yaml", *fsrcnn_, 0.2, nullptr);
  EXPECT_TRUE(s->controls_lr());
  EXPECT_EQ(s->policies().back().kind, Policy::Kind::kLrScheduler);  // LR policies run last
  torch::optim::SGD opt(fsrcnn_->parameters(), 0.2);
  auto p = fsrcnn_->named_parameters();
  auto zero = torch::zeros({});
  auto reg = s->before_backward_pass({0, 0, 1}, zero, opt);
  const double expected = 0.01 * p["mid_part.1.weight"].abs().sum().item<double>() +
                          0.1 * p["mid_part.3.weight"].flatten(1).norm(2, {1}).sum().item<double>();
  EXPECT_NEAR(reg.item<double>(), expected, 1e-4);
  EXPECT_EQ(s->before_backward_pass({1, 0, 1}, zero, opt).item<double>(),
            0.0);  // not active at epoch 1
  std::vector<double> lrs;
  for (int64_t e = 0; e < 5; ++e) {
    s->on_epoch_end(e, {}, opt);
    lrs.push_back(opt.param_groups()[0].options().get_lr());
  }
  // After step k: 0.2, ×0.5 from step 1, ×0.1 more from step 3.
  EXPECT_NEAR(lrs[0], 0.1, 1e-12);
  EXPECT_NEAR(lrs[1], 0.1, 1e-12);
  EXPECT_NEAR(lrs[2], 0.01, 1e-12);
  EXPECT_NEAR(lrs[4], 0.01, 1e-12);

  // State round trip: LR steps and masks.
  torch::serialize::OutputArchive out;
  s->save_state(out);
  std::stringstream buf;
  out.save_to(buf);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  auto s2 = CompressionScheduler::from_text(yaml, "s.yaml", *fsrcnn_, 0.2, nullptr);
  s2->load_state(in);
  s2->on_epoch_end(5, {}, opt);
  EXPECT_NEAR(opt.param_groups()[0].options().get_lr(), 0.01, 1e-12);
}

TEST_F(SchedulerTest, PolicyArgsDoubleCopiesForwardOnlyAndGradientMasks) {
  auto yaml = [](const char* args) {
    return std::string(
               "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n"
               "    levels: {mid_part.1.weight: 0.5}\npolicies:\n  - pruner:\n      instance_name: "
               "p\n"
               "      args: ") +
           args + "\n    starting_epoch: 0\n    ending_epoch: 2\n";
  };
  auto w = fsrcnn_->named_parameters()["mid_part.1.weight"];
  auto step = [&](CompressionScheduler& s, torch::optim::Optimizer& opt,
                  bool check_forward_masked) {
    MinibatchInfo info{0, 0, 1};
    s.on_minibatch_begin(info, opt);
    if (check_forward_masked)
      EXPECT_EQ(w.masked_select(s.masks().at("mid_part.1.weight").eq(0)).abs().sum().item<float>(),
                0.0f);
    auto loss = fsrcnn_->forward(torch::rand({2, 1, 8, 8})).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    s.before_parameter_optimization(info, opt);
    opt.step();
    s.on_minibatch_end(info, opt);
  };
  {
    // use_double_copies with mask_on_forward_only: forward sees the masked weight, the optimizer
    // updates the dense copy.
    auto s = CompressionScheduler::from_text(
        yaml("{use_double_copies: true, mask_on_forward_only: true}"), "s.yaml", *fsrcnn_, 0.1,
        nullptr);
    torch::optim::SGD opt(fsrcnn_->parameters(), 0.5);
    s->on_epoch_begin(0, opt);
    step(*s, opt, true);
    EXPECT_GT(w.masked_select(s->masks().at("mid_part.1.weight").eq(0)).abs().sum().item<float>(),
              0.0f);
  }
  {
    // mask_gradients (with mask_on_forward_only, which Distiller requires): pruned positions get
    // no gradient.
    auto s =
        CompressionScheduler::from_text(yaml("{mask_gradients: true, mask_on_forward_only: true}"),
                                        "s.yaml", *fsrcnn_, 0.1, nullptr);
    torch::optim::SGD opt(fsrcnn_->parameters(), 0.5);
    s->on_epoch_begin(0, opt);
    MinibatchInfo info{0, 0, 1};
    s->on_minibatch_begin(info, opt);
    auto loss = fsrcnn_->forward(torch::rand({2, 1, 8, 8})).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    s->before_parameter_optimization(info, opt);
    EXPECT_EQ(
        w.grad().masked_select(s->masks().at("mid_part.1.weight").eq(0)).abs().sum().item<float>(),
        0.0f);
  }
  // Unknown policy args are errors.
  expect_error(yaml("{keep_masks: true}"), *fsrcnn_,
               {"s.yaml:9:", "unknown key 'keep_masks'", "did you mean keep_mask?"});
  // distiller/policy.py PruningPolicy.__init__: mask_gradients without mask_on_forward_only is
  // refused.
  expect_error(yaml("{mask_gradients: true}"), *fsrcnn_,
               {"s.yaml:9:", "mask_gradients needs mask_on_forward_only: true"});
}

namespace {

// A 4 → 1 linear layer with weight [1, 2, 30, 40] and zero bias, pruned by `pruner` (a mapping
// naming `weight`) under a policy with `args` and `timing`. Each train step feeds ones, so the
// gradient of out.sum() is 1 for every weight and SGD(lr 1) lowers each weight by 1.
struct LinearRun {
  LinearRun(const std::string& pruner, const std::string& args, const std::string& timing)
      : model(4, 1), opt(model->parameters(), 1.0) {
    {
      torch::NoGradGuard g;
      model->weight.copy_(torch::tensor({{1.0f, 2.0f, 30.0f, 40.0f}}));
      model->bias.zero_();
    }
    sched = CompressionScheduler::from_text(
        "version: 1\npruners:\n  p: " + pruner +
            "\npolicies:\n  - pruner: {instance_name: p, args: " + args + "}\n" + timing,
        "s.yaml", *model, 1.0, nullptr);
  }
  void step(int64_t epoch, int64_t batch, int64_t batches) {
    const MinibatchInfo info{epoch, batch, batches};
    sched->on_minibatch_begin(info, opt);
    auto loss = model->forward(torch::ones({1, 4})).sum();
    loss = sched->before_backward_pass(info, loss, opt);
    opt.zero_grad();
    loss.backward();
    sched->before_parameter_optimization(info, opt);
    opt.step();
    sched->on_minibatch_end(info, opt);
  }
  std::vector<float> weight() const {
    auto w = model->weight.detach().flatten().contiguous();
    return {w.data_ptr<float>(), w.data_ptr<float>() + w.numel()};
  }
  void set(int64_t i, float v) {
    torch::NoGradGuard g;
    model->weight[0][i].fill_(v);
  }
  torch::nn::Linear model;
  torch::optim::SGD opt;
  std::unique_ptr<CompressionScheduler> sched;
};

const char* kHalf = "{class: SparsityLevelParameterPruner, levels: {weight: 0.5}}";
const char* kEpoch0 = "    starting_epoch: 0\n    ending_epoch: 1\n";

using W = std::vector<float>;

}  // namespace

// distiller/policy.py PruningPolicy and scheduler.py mask_all_weights: use_double_copies alone
// still masks after every step; with mask_on_forward_only the dense weights train on.
TEST(SchedulerPolicyArgs, DoubleCopiesMaskAfterTheStepUnlessForwardOnly) {
  {
    LinearRun r(kHalf, "{use_double_copies: true}", kEpoch0);
    r.sched->on_epoch_begin(0, r.opt);
    EXPECT_EQ(r.weight(), (W{1, 2, 30, 40}));  // the dense weights wait for the forward pass
    r.step(0, 0, 2);
    // Forward on [0, 0, 30, 40]; the dense [1, 2, 30, 40] steps to [0, 1, 29, 39]; masked again.
    EXPECT_EQ(r.weight(), (W{0, 0, 29, 39}));
  }
  {
    LinearRun r(kHalf, "{use_double_copies: true, mask_on_forward_only: true}", kEpoch0);
    r.sched->on_epoch_begin(0, r.opt);
    r.step(0, 0, 2);
    EXPECT_EQ(r.weight(), (W{0, 1, 29, 39}));
    r.step(0, 1, 2);  // dense [0, 1, 29, 39] − 1
    EXPECT_EQ(r.weight(), (W{-1, 0, 28, 38}));
  }
}

// distiller/policy.py PruningPolicy.on_epoch_end: mask_on_forward_only without keep_mask stops
// masking after the policy's last epoch; keep_mask makes the masks permanent then.
TEST(SchedulerPolicyArgs, ForwardOnlyMasksEndWithThePolicyUnlessKept) {
  {
    LinearRun r(kHalf, "{mask_on_forward_only: true}", kEpoch0);
    r.sched->on_epoch_begin(0, r.opt);
    EXPECT_EQ(r.weight(), (W{0, 0, 30, 40}));
    r.step(0, 0, 1);  // not masked after the step
    EXPECT_EQ(r.weight(), (W{-1, -1, 29, 39}));
    r.sched->on_epoch_end(0, {}, r.opt);
    r.sched->on_epoch_begin(1, r.opt);
    r.step(1, 0, 1);  // the policy is over: nothing is masked
    EXPECT_EQ(r.weight(), (W{-2, -2, 28, 38}));
  }
  {
    LinearRun r(kHalf, "{mask_on_forward_only: true, keep_mask: true}", kEpoch0);
    r.sched->on_epoch_begin(0, r.opt);
    r.step(0, 0, 1);
    r.sched->on_epoch_end(0, {}, r.opt);
    EXPECT_EQ(r.weight(), (W{0, 0, 29, 39}));
    r.sched->on_epoch_begin(1, r.opt);
    r.step(1, 0, 1);  // masked after every step from now on
    EXPECT_EQ(r.weight(), (W{0, 0, 28, 38}));
  }
}

// The masking modes are part of the checkpoint: a run resumed after a forward-only policy ended
// goes on unmasked, as distiller/policy.py PruningPolicy leaves it.
TEST(SchedulerPolicyArgs, MaskingModesSurviveACheckpoint) {
  LinearRun r(kHalf, "{mask_on_forward_only: true}", kEpoch0);
  r.sched->on_epoch_begin(0, r.opt);
  r.step(0, 0, 1);
  r.sched->on_epoch_end(0, {}, r.opt);
  torch::serialize::OutputArchive out;
  r.sched->save_state(out);
  std::stringstream buf;
  out.save_to(buf);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  auto resumed = CompressionScheduler::from_text(
      "version: 1\npruners:\n  p: " + std::string(kHalf) +
          "\npolicies:\n  - pruner: {instance_name: p, args: {mask_on_forward_only: true}}\n" +
          kEpoch0,
      "s.yaml", *r.model, 1.0, nullptr);
  resumed->load_state(in);
  r.sched = std::move(resumed);
  r.sched->on_epoch_begin(1, r.opt);
  r.step(1, 0, 1);  // [-1, -1, 29, 39] − 1, not masked
  EXPECT_EQ(r.weight(), (W{-2, -2, 28, 38}));
}

// distiller/policy.py PruningPolicy.on_epoch_begin: keep_mask acts at the end of epoch
// ending_epoch − 1, here 3 with epochs 0 and 2 scheduled (Distiller never reaches it; see
// docs/schedules.md, Differences from Distiller).
TEST(SchedulerPolicyArgs, KeepMaskActsAtEndingEpochMinusOne) {
  LinearRun r(kHalf, "{mask_on_forward_only: true, keep_mask: true}",
              "    starting_epoch: 0\n    ending_epoch: 4\n    frequency: 2\n");
  // e0: masked forward, −1 → [-1, -1, 29, 39]; e1 unscheduled: no masking → [-2, -2, 28, 38];
  // e2: the masks are recomputed (|w| 2, 2 are the smallest half) → [0, 0, 28, 38], −1.
  for (int64_t e = 0; e < 3; ++e) {
    r.sched->on_epoch_begin(e, r.opt);
    r.step(e, 0, 1);
    r.sched->on_epoch_end(e, {}, r.opt);
  }
  EXPECT_EQ(r.weight(), (W{-1, -1, 27, 37}));  // epoch 2 is the last scheduled, not the last
  r.sched->on_epoch_begin(3, r.opt);
  r.step(3, 0, 1);
  EXPECT_EQ(r.weight(), (W{-2, -2, 26, 36}));
  r.sched->on_epoch_end(3, {}, r.opt);
  EXPECT_EQ(r.weight(), (W{0, 0, 26, 36}));
  r.sched->on_epoch_begin(4, r.opt);
  r.step(4, 0, 1);
  EXPECT_EQ(r.weight(), (W{0, 0, 25, 35}));
}

// distiller/policy.py PruningPolicy.on_minibatch_begin: masks are recomputed when the global
// minibatch index epoch · batches + batch (not the index within the epoch) is a multiple of
// mini_batch_pruning_frequency, never at an epoch's first minibatch.
TEST(SchedulerPolicyArgs, MiniBatchPruningFrequencyCountsGlobalMinibatches) {
  LinearRun r("{class: MagnitudeParameterPruner, thresholds: {weight: 2.5}}",
              "{mini_batch_pruning_frequency: 2}", "    starting_epoch: 0\n    ending_epoch: 2\n");
  r.sched->on_epoch_begin(1, r.opt);
  EXPECT_EQ(r.weight(), (W{0, 0, 30, 40}));
  r.set(2, 1.0f);  // now under the threshold, but masked only when the masks are recomputed
  r.sched->on_minibatch_begin({1, 0, 3}, r.opt);  // global 3
  EXPECT_EQ(r.weight(), (W{0, 0, 1, 40}));
  r.sched->on_minibatch_begin({1, 1, 3}, r.opt);  // global 4 = 2 · 2
  EXPECT_EQ(r.weight(), (W{0, 0, 0, 40}));
}

// distiller/policy.py PruningPolicy: skip_first_minibatch computes the first masks at global
// minibatch 1; discard_masks_at_minibatch_end drops the masks after the step's masking.
TEST(SchedulerPolicyArgs, SkipFirstMinibatchAndDiscardMasks) {
  {
    LinearRun r(kHalf, "{skip_first_minibatch: true}",
                "    starting_epoch: 0\n    ending_epoch: 2\n");
    r.sched->on_epoch_begin(0, r.opt);
    r.sched->on_minibatch_begin({0, 0, 3}, r.opt);
    EXPECT_TRUE(r.sched->masks().empty());
    EXPECT_EQ(r.weight(), (W{1, 2, 30, 40}));
    r.sched->on_minibatch_begin({0, 1, 3}, r.opt);
    EXPECT_EQ(r.weight(), (W{0, 0, 30, 40}));
  }
  {
    LinearRun r(kHalf, "{discard_masks_at_minibatch_end: true}", kEpoch0);
    r.sched->on_epoch_begin(0, r.opt);
    r.step(0, 0, 2);  // [0, 0, 30, 40] − 1, masked after the step, then the masks go
    EXPECT_EQ(r.weight(), (W{0, 0, 29, 39}));
    EXPECT_TRUE(r.sched->masks().empty());
    r.step(0, 1, 2);
    EXPECT_EQ(r.weight(), (W{-1, -1, 28, 38}));
  }
}

// distiller/policy.py RegularizationPolicy.on_minibatch_end: thresholding at every minibatch of
// a regularized epoch zeroes once; keep_mask keeps the mask only from the last minibatch of the
// policy's last epoch.
TEST(SchedulerPolicyArgs, RegularizerThresholdsEveryMinibatchAndKeepsTheMaskAtTheEnd) {
  torch::nn::Linear model(4, 1);
  torch::optim::SGD opt(model->parameters(), 1.0);
  auto set = [&](std::vector<float> v) {
    torch::NoGradGuard g;
    model->weight.copy_(torch::tensor(v).reshape({1, 4}));
  };
  auto weight = [&] {
    auto w = model->weight.detach().flatten().contiguous();
    return W(w.data_ptr<float>(), w.data_ptr<float>() + 4);
  };
  set({1, 2, 30, 40});
  auto s = CompressionScheduler::from_text(
      "version: 1\nregularizers:\n  r: {class: L1Regularizer, threshold_criteria: Mean_Abs, "
      "reg_regims: {weight: 1.5}}\npolicies:\n  - regularizer: {instance_name: r, args: "
      "{keep_mask: true}}\n    starting_epoch: 0\n    ending_epoch: 2\n",
      "s.yaml", *model, 1.0, nullptr);
  s->on_minibatch_end({0, 0, 2}, opt);  // |w| ≤ 1.5 zeroed at the first minibatch already
  EXPECT_EQ(weight(), (W{0, 2, 30, 40}));
  EXPECT_TRUE(s->masks().empty());
  set({5, 1, 30, 40});
  s->on_minibatch_end({0, 1, 2}, opt);  // the last minibatch of epoch 0: zeroed, not kept
  EXPECT_EQ(weight(), (W{5, 0, 30, 40}));
  EXPECT_TRUE(s->masks().empty());
  set({1, 2, 30, 40});
  s->on_minibatch_end({1, 1, 2}, opt);  // the last minibatch of the last epoch: kept
  ASSERT_EQ(s->masks().count("weight"), 1u);
  set({7, 2, 30, 40});
  s->on_minibatch_end({2, 0, 2}, opt);
  EXPECT_EQ(weight(), (W{0, 2, 30, 40}));
}

// distiller/regularization/group_regularizer.py GroupVarianceRegularizer.loss: strength over the
// unbiased variance of the input channels' L2 norms.
TEST(SchedulerRegularizers, GroupVarianceRegularizerDividesByTheChannelNormVariance) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 2, 1));
  {
    torch::NoGradGuard g;
    // Filters [1, 2, 0] and [0, 0, 3]: channel norms 1, 2, 3 (mean 2, variance (1 + 0 + 1) / 2).
    conv->weight.copy_(torch::tensor({1.0f, 2.0f, 0.0f, 0.0f, 0.0f, 3.0f}).reshape({2, 3, 1, 1}));
  }
  const std::string head =
      "version: 1\nregularizers:\n  gv:\n    class: GroupVarianceRegularizer\n    reg_regims: "
      "{weight: ";
  const std::string policy =
      "}\npolicies:\n  - regularizer: {instance_name: gv}\n    epochs: [0]\n";
  auto s = CompressionScheduler::from_text(head + "[0.5, Channels]" + policy, "s.yaml", *conv, 0.1,
                                           nullptr);
  torch::optim::SGD opt(conv->parameters(), 0.1);
  EXPECT_NEAR(s->before_backward_pass({0, 0, 1}, torch::zeros({}), opt).item<double>(), 0.5, 1e-6);
  try {
    CompressionScheduler::from_text(head + "[0.5, 3D]" + policy, "s.yaml", *conv, 0.1, nullptr);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "s.yaml:5: GroupVarianceRegularizer groups only Channels, not '3D'");
  }
}

TEST_F(SchedulerTest, EveryLrSchedulerFollowsItsClosedForm) {
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {"{class: StepLR, step_size: 2, gamma: 0.5}", {1.0, 0.5, 0.5, 0.25}},
      {"{class: MultiStepLR, milestones: [2, 3], gamma: 0.1}", {1.0, 0.1, 0.01, 0.01}},
      {"{class: ExponentialLR, gamma: 0.9}", {0.9, 0.81, 0.729, 0.6561}},
      {"{class: CosineAnnealingLR, T_max: 4}",
       {0.5 + 0.5 * std::cos(M_PI / 4), 0.5, 0.5 + 0.5 * std::cos(3 * M_PI / 4), 0.0}},
      {"{class: PolynomialLR, T_max: 4, power: 2}", {0.5625, 0.25, 0.0625, 0.0}},
      {"{class: MultiStepMultiGammaLR, milestones: [1, 3], gammas: [0.5, 0.2]}",
       {0.5, 0.5, 0.1, 0.1}}};
  for (const auto& [spec, expected] : cases) {
    auto yaml = "version: 1\nlr_schedulers:\n  lr: " + spec +
                "\npolicies:\n  - lr_scheduler: {instance_name: lr}\n    starting_epoch: 0\n    "
                "ending_epoch: 9\n";
    auto s = CompressionScheduler::from_text(yaml, "s.yaml", *fsrcnn_, 1.0, nullptr);
    torch::optim::SGD opt(fsrcnn_->parameters(), 1.0);
    for (size_t e = 0; e < expected.size(); ++e) {
      s->on_epoch_end(static_cast<int64_t>(e), {}, opt);
      EXPECT_NEAR(opt.param_groups()[0].options().get_lr(), expected[e], 1e-9)
          << spec << " step " << e + 1;
    }
  }
}

TEST_F(SchedulerTest, GroupLassoThresholdMasksWeakFilters) {
  {
    torch::NoGradGuard g;
    auto w = resnet_->named_parameters()["layer1.0.conv1.weight"];
    w.fill_(0.1);
    w[3].fill_(0.0001);  // mean |w| 1e-4 < strength 1e-3
    w[7].fill_(-0.0002);
    resnet_->named_parameters()["layer1.0.bn1.bias"].uniform_(0.5, 1.5);  // BN biases start at zero
  }
  const char* yaml = R"(version: 1
regularizers:
  gl:
    class: GroupLassoRegularizer
    threshold_criteria: Mean_Abs
    reg_regims: {layer1.0.conv1.weight: [0.001, Filters]}
policies:
  - regularizer: {instance_name: gl, args: {keep_mask: true}}
    epochs: [0]
)";
  auto s = traced(CompressionScheduler::from_text(yaml, "s.yaml", *resnet_, 0.1, nullptr), resnet_);
  torch::optim::SGD opt(resnet_->parameters(), 0.1);
  s->on_epoch_begin(0, opt);
  s->on_minibatch_end({0, 0, 1}, opt);  // the last minibatch of the epoch
  auto zero_filters =
      resnet_->named_parameters()["layer1.0.conv1.weight"].flatten(1).abs().sum(1).eq(0);
  auto expected = torch::zeros({16}, torch::kBool);
  expected[3] = true;
  expected[7] = true;
  EXPECT_TRUE(torch::equal(zero_filters, expected));
  EXPECT_TRUE(
      torch::equal(s->masks().at("layer1.0.conv1.weight").flatten(1).sum(1).eq(0), expected));
  // The following BatchNorm goes with the filters, so evaluation sees exactly zero channels.
  EXPECT_TRUE(torch::equal(resnet_->named_parameters()["layer1.0.bn1.weight"].eq(0), expected));
  EXPECT_TRUE(torch::equal(resnet_->named_parameters()["layer1.0.bn1.bias"].eq(0), expected));
}

}  // namespace igb::compress
