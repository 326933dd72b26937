// LR schedulers' options: from_yaml reads values and defaults, refuses bad values and unknown keys
// naming file:line, and hyperparams() loads back into a scheduler with the same rates. Then the
// LR policies as the compression scheduler steps them (suite LrPolicies): Distiller's epoch
// numbering, several policies in one schedule, ReduceLROnPlateau's metric, and resuming.
#include "compress/lr_schedulers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "compress/scheduler.h"
#include "core/error.h"
#include "core/optim_lr.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

YamlReader reader(const std::string& text, const std::string& cls) {
  YamlReader r(YAML::Load(text), "s.yaml", "lr_schedulers.lr (" + cls + ")");
  r.ignore({"class"});
  return r;
}

std::unique_ptr<LrScheduler> make(const std::string& cls, const std::string& text) {
  register_builtin_lr_schedulers();
  auto r = reader(text, cls);
  return lr_scheduler_registry().get(cls)(r);
}

void expect_error(const std::string& cls, const std::string& text,
                  const std::vector<std::string>& needles) {
  try {
    make(cls, text);
    ADD_FAILURE() << "no error for " << cls << ": " << text;
  } catch (const InputError& e) {
    for (const auto& n : needles)
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << "\nwanted: " << n;
  }
}

}  // namespace

TEST(LrSchedulerOptions, FromYamlReadsValuesAndDefaults) {
  auto r = reader("step_size: 3", "StepLR");
  auto step = StepLROptions::from_yaml(r);
  EXPECT_EQ(step.step_size(), 3);
  EXPECT_DOUBLE_EQ(step.gamma(), 0.1);
  auto r2 = reader("step_size: 2\ngamma: 0.5", "StepLR");
  EXPECT_DOUBLE_EQ(StepLROptions::from_yaml(r2).gamma(), 0.5);

  auto r3 = reader("milestones: [2, 5]", "MultiStepLR");
  auto multi = MultiStepLROptions::from_yaml(r3);
  EXPECT_EQ(multi.milestones(), (std::vector<int64_t>{2, 5}));
  EXPECT_DOUBLE_EQ(multi.gamma(), 0.1);

  auto r4 = reader("T_max: 8", "CosineAnnealingLR");
  auto cosine = CosineAnnealingLROptions::from_yaml(r4);
  EXPECT_DOUBLE_EQ(cosine.T_max(), 8);
  EXPECT_DOUBLE_EQ(cosine.eta_min(), 0.0);

  auto r5 = reader("T_max: 4", "PolynomialLR");
  EXPECT_DOUBLE_EQ(PolynomialLROptions::from_yaml(r5).power(), 1.0);

  auto r6 = reader("gamma: 0.9", "ExponentialLR");
  EXPECT_DOUBLE_EQ(ExponentialLROptions::from_yaml(r6).gamma(), 0.9);

  auto r7 = reader("milestones: [1, 3]\ngammas: [0.5, 0.2]", "MultiStepMultiGammaLR");
  auto mm = MultiStepMultiGammaLROptions::from_yaml(r7);
  EXPECT_EQ(mm.gammas(), (std::vector<double>{0.5, 0.2}));
  // lr after k steps: ×0.5 from step 1, ×0.2 more from step 3.
  MultiStepMultiGammaLR s(mm);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 0), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(1.0, 2), 0.5);
  EXPECT_NEAR(s.lr(1.0, 3), 0.1, 1e-15);

  auto r8 = reader("T_0: 5", "CosineAnnealingWarmRestarts");
  auto warm = CosineAnnealingWarmRestartsOptions::from_yaml(r8);
  EXPECT_EQ(warm.T_0(), 5);
  EXPECT_EQ(warm.T_mult(), 1);
  EXPECT_DOUBLE_EQ(warm.eta_min(), 0.0);

  // PyTorch's defaults.
  auto r9 = reader("{}", "ReduceLROnPlateau");
  auto plateau = ReduceLROnPlateauOptions::from_yaml(r9);
  EXPECT_EQ(plateau.mode(), "min");
  EXPECT_DOUBLE_EQ(plateau.factor(), 0.1);
  EXPECT_EQ(plateau.patience(), 10);
  EXPECT_DOUBLE_EQ(plateau.threshold(), 1e-4);
  EXPECT_EQ(plateau.threshold_mode(), "rel");
  EXPECT_EQ(plateau.cooldown(), 0);
  EXPECT_DOUBLE_EQ(plateau.min_lr(), 0.0);
  EXPECT_DOUBLE_EQ(plateau.eps(), 1e-8);
  EXPECT_FALSE(plateau.verbose());
}

TEST(LrSchedulerOptions, BadValuesAndUnknownKeysNameFileAndLine) {
  expect_error("StepLR", "step_size: 0", {"s.yaml:1:", "step_size must be positive"});
  expect_error("StepLR", "gamma: 0.5",
               {"s.yaml:1:", "lr_schedulers.lr (StepLR) is missing the key 'step_size'"});
  expect_error(
      "StepLR", "step_size: 2\nstep: 3",
      {"s.yaml:2:", "unknown key 'step' in lr_schedulers.lr (StepLR)", "step_size", "gamma"});
  expect_error("MultiStepLR", "milestones: [5, 2]",
               {"s.yaml:1:", "lr_schedulers.lr (MultiStepLR).milestones must be increasing"});
  expect_error("MultiStepMultiGammaLR", "milestones: [1, 2]\ngammas: [0.5]",
               {"s.yaml:2:", "needs one gamma per milestone"});
  expect_error("CosineAnnealingLR", "T_max: 0",
               {"s.yaml:1:", "(CosineAnnealingLR).T_max must be positive"});
  expect_error("PolynomialLR", "T_max: 4\npower: x",
               {"s.yaml:2:", "(PolynomialLR).power has the wrong type of value"});
  expect_error("ExponentialLR", "gamma: 0.9\neta_min: 0", {"s.yaml:2:", "unknown key 'eta_min'"});
  expect_error("CosineAnnealingWarmRestarts", "T_0: 0",
               {"s.yaml:1:", "(CosineAnnealingWarmRestarts).T_0 must be positive"});
  expect_error("CosineAnnealingWarmRestarts", "T_0: 2\nT_mult: 0",
               {"s.yaml:2:", "T_mult must be an integer >= 1"});
  expect_error("CosineAnnealingWarmRestarts", "T_0: 2\nT_mult: 1.5",
               {"s.yaml:2:", "T_mult has the wrong type of value"});
  expect_error("ReduceLROnPlateau", "mode: maximum",
               {"s.yaml:1:", "(ReduceLROnPlateau).mode is 'maximum'; valid: min, max"});
  expect_error("ReduceLROnPlateau", "factor: 1.0", {"s.yaml:1:", "factor must be >= 0 and < 1"});
  expect_error("ReduceLROnPlateau", "threshold_mode: relative", {"s.yaml:1:", "valid: rel, abs"});
  expect_error("ReduceLROnPlateau", "patience: -1", {"s.yaml:1:", "patience must be >= 0"});
  expect_error("ReduceLROnPlateau", "mode: max\nmetric: psnr",
               {"s.yaml:2:", "unknown key 'metric'", "min_lr"});
}

// torch.optim.lr_scheduler.CosineAnnealingWarmRestarts: T_cur restarts at 0 at the start of each
// period, periods T_0, T_0·T_mult, …
TEST(LrSchedulerOptions, CosineAnnealingWarmRestartsClosedForm) {
  CosineAnnealingWarmRestarts s(CosineAnnealingWarmRestartsOptions(2).T_mult(2));
  // Periods [0, 2), [2, 6), [6, 14): lr = (1 + cos(π·T_cur/T_i))/2.
  const std::vector<double> expected = {1.0,                 // e0: T_cur 0
                                        0.5,                 // e1: T_cur 1 of 2, (1 + cos(π/2))/2
                                        1.0,                 // e2: restart
                                        0.8535533905932737,  // e3: T_cur 1 of 4, (1 + cos(π/4))/2
                                        0.5,                 // e4: T_cur 2 of 4
                                        0.1464466094067263,  // e5: (1 + cos(3π/4))/2
                                        1.0};                // e6: restart
  for (size_t e = 0; e < expected.size(); ++e)
    EXPECT_NEAR(s.lr(1.0, static_cast<int64_t>(e)), expected[e], 1e-12) << "epoch " << e;
  EXPECT_NEAR(s.lr(1.0, 13), 0.03806023374435663, 1e-12);  // T_cur 7 of 8: (1 + cos(7π/8))/2
  // T_mult 1: every period T_0 long; eta_min is the floor. e7 = 2·3 + 1: 0.1 + 0.9·(1 +
  // cos(π/3))/2.
  CosineAnnealingWarmRestarts flat(CosineAnnealingWarmRestartsOptions(3).eta_min(0.1));
  EXPECT_NEAR(flat.lr(1.0, 7), 0.1 + 0.9 * 0.75, 1e-12);
  // Periods 10, 100, 1000 start at 0, 10, 110, 1110: epoch 1110 is a restart (PyTorch's floating
  // logarithm, log10(1000) = 2.9999999999999996, puts it at the end of the previous period).
  CosineAnnealingWarmRestarts tens(CosineAnnealingWarmRestartsOptions(10).T_mult(10));
  EXPECT_DOUBLE_EQ(tens.lr(1.0, 1110), 1.0);
  EXPECT_NEAR(tens.lr(1.0, 1109), (1 + std::cos(M_PI * 999 / 1000)) / 2, 1e-12);
}

// torch.optim.lr_scheduler.ReduceLROnPlateau.step (is_better, cooldown, _reduce_lr with min_lr and
// eps), fed as Distiller's LRPolicy.on_epoch_end feeds it: one metric per epoch.
TEST(LrSchedulerOptions, ReduceLROnPlateauFollowsPyTorch) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto run = [](ReduceLROnPlateau& s, const std::vector<double>& metrics, double lr) {
    std::vector<double> out;
    for (size_t e = 0; e < metrics.size(); ++e) {
      lr = s.step({static_cast<int64_t>(e), 1.0, lr, metrics[e]});
      out.push_back(lr);
    }
    return out;
  };
  const auto opts = ReduceLROnPlateauOptions()
                        .mode("max")
                        .factor(0.5)
                        .patience(1)
                        .threshold(0.01)
                        .cooldown(1)
                        .min_lr(0.2);
  const std::vector<double> metrics = {20.0, 20.1, 20.3, 20.4, 20.5, 20.0, 20.0,
                                       nan,  30.0, 29.0, 29.0, 29.0, 29.0, 29.0};
  // best 20; 20.1 ≤ 20·1.01 bad 1; 20.3 best; 20.4, 20.5 ≤ 20.503 bad 1, 2 > patience: ×0.5,
  // cooldown 1; 20.0 bad but in cooldown; 20.0 bad 1; NaN bad 2: ×0.5; 30 best; 29 bad 1, 2:
  // max(0.125, min_lr 0.2) = 0.2; cooldown; bad 1, 2: max(0.1, 0.2) = 0.2 is no reduction.
  const std::vector<double> expected = {1,    1,    1,    1,   0.5, 0.5, 0.5,
                                        0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2};
  ReduceLROnPlateau s(opts);
  EXPECT_EQ(run(s, metrics, 1.0), expected);

  // The state carries best, bad epochs and cooldown: stop after epoch 5, load into a fresh one.
  ReduceLROnPlateau first(opts), second(opts);
  run(first, std::vector<double>(metrics.begin(), metrics.begin() + 6), 1.0);
  second.load_state(nlohmann::json::parse(first.state().dump()));
  std::vector<double> rest;
  double lr = 0.5;
  for (size_t e = 6; e < metrics.size(); ++e)
    rest.push_back(lr = second.step({static_cast<int64_t>(e), 1.0, lr, metrics[e]}));
  EXPECT_EQ(rest, std::vector<double>(expected.begin() + 6, expected.end()));

  // mode min, abs: 0.95 is not below 1 − 0.1, bad 1 > patience 0: ×0.1; 0.85 < 0.9 best;
  // 0.80 not below 0.75: ×0.1.
  ReduceLROnPlateau low(
      ReduceLROnPlateauOptions().threshold_mode("abs").threshold(0.1).patience(0));
  const auto lows = run(low, {1.0, 0.95, 0.85, 0.80}, 1.0);
  ASSERT_EQ(lows.size(), 4u);
  EXPECT_DOUBLE_EQ(lows[0], 1.0);
  EXPECT_DOUBLE_EQ(lows[1], 0.1);
  EXPECT_DOUBLE_EQ(lows[2], 0.1);
  EXPECT_NEAR(lows[3], 0.01, 1e-15);
}

TEST(LrSchedulerOptions, HyperparamsLoadBackIntoTheSameSchedule) {
  const std::map<std::string, std::string> specs = {
      {"StepLR", "step_size: 2"},
      {"MultiStepLR", "milestones: [2, 3]\ngamma: 0.3"},
      {"ExponentialLR", "gamma: 0.9"},
      {"CosineAnnealingLR", "T_max: 4\neta_min: 0.01"},
      {"PolynomialLR", "T_max: 5\npower: 2"},
      {"MultiStepMultiGammaLR", "milestones: [1, 3]\ngammas: [0.5, 0.2]"},
      {"CosineAnnealingWarmRestarts", "T_0: 2\nT_mult: 2\neta_min: 0.01"},
      {"ReduceLROnPlateau", "mode: max\nfactor: 0.5\npatience: 0\nthreshold_mode: abs"}};
  register_builtin_lr_schedulers();
  EXPECT_EQ(lr_scheduler_registry().names().size(), specs.size());
  for (const auto& [cls, text] : specs) {
    auto s = make(cls, text);
    const auto json = s->hyperparams();
    EXPECT_EQ(json.at("class"), cls);
    auto again = make(cls, json.dump());
    EXPECT_EQ(again->hyperparams(), json) << json.dump();
    double lr_s = 0.2, lr_again = 0.2;
    for (int64_t e = 0; e < 8; ++e) {
      const double metric = e % 3 == 0 ? 30.0 - e : 20.0;
      lr_s = s->step({e, 0.2, lr_s, metric});
      lr_again = again->step({e, 0.2, lr_again, metric});
      EXPECT_DOUBLE_EQ(lr_again, lr_s) << cls << " epoch " << e;
    }
  }
  EXPECT_EQ(make("StepLR", "step_size: 2")->hyperparams(),
            nlohmann::json::parse(R"({"class": "StepLR", "step_size": 2, "gamma": 0.1})"));
  EXPECT_EQ(
      make("CosineAnnealingLR", "T_max: 4")->hyperparams(),
      nlohmann::json::parse(R"({"class": "CosineAnnealingLR", "T_max": 4.0, "eta_min": 0.0})"));
}

// --- LR policies in a schedule ---------------------------------------------------------------

namespace {

class LrPolicies : public ::testing::Test {
 protected:
  LrPolicies() { register_builtin_compression(); }

  std::unique_ptr<CompressionScheduler> schedule(const std::string& lr_schedulers,
                                                 const std::string& policies) {
    auto s = CompressionScheduler::from_text(
        "version: 1\nlr_schedulers:\n" + lr_schedulers + "policies:\n" + policies, "s.yaml",
        *model_, 1.0, nullptr);
    s->set_validation_metric("psnr", true);
    return s;
  }

  /// The rate each epoch from `first` to `last` trains with, running the epoch hooks as the
  /// trainer does; `metrics(e)` is the validation of epoch e.
  std::vector<double> run(
      CompressionScheduler& s, torch::optim::Optimizer& opt, int64_t first, int64_t last,
      const std::function<std::map<std::string, double>(int64_t)>& metrics = nullptr) {
    std::vector<double> lrs;
    for (int64_t e = first; e <= last; ++e) {
      s.on_epoch_begin(e, opt);
      lrs.push_back(get_lr(opt));
      s.on_epoch_end(e, metrics ? metrics(e) : std::map<std::string, double>{}, opt);
    }
    return lrs;
  }

  torch::nn::Linear model_{4, 2};
};

}  // namespace

// distiller/policy.py LRPolicy.on_epoch_end: step(epoch = current_epoch + 1), the closed form at
// the epoch counted from 0 — not from the policy's first epoch.
TEST_F(LrPolicies, StepLRFromEpoch45DecaysFromEpoch46) {
  auto s = schedule("  lr: {class: StepLR, step_size: 45}\n",
                    "  - lr_scheduler: {instance_name: lr}\n"
                    "    starting_epoch: 45\n    ending_epoch: 200\n    frequency: 1\n");
  torch::optim::SGD opt(model_->parameters(), 1.0);
  const auto lrs = run(*s, opt, 0, 91);
  EXPECT_DOUBLE_EQ(lrs[0], 1.0);
  EXPECT_DOUBLE_EQ(lrs[45], 1.0);     // stepped at the end of epoch 45, for epoch 46
  EXPECT_NEAR(lrs[46], 0.1, 1e-15);   // 0.1^(46 // 45)
  EXPECT_NEAR(lrs[89], 0.1, 1e-15);   // 0.1^(89 // 45)
  EXPECT_NEAR(lrs[90], 0.01, 1e-15);  // 0.1^(90 // 45)
}

// distiller/config.py builds every LR scheduler before training, and PyTorch's _LRScheduler sets
// the closed form at epoch 0 when built: a milestone at 0 applies from epoch 0, before the policy.
TEST_F(LrPolicies, MilestoneAtZeroAppliesWhenTheSchedulerIsBuilt) {
  auto s = schedule("  lr: {class: MultiStepLR, milestones: [0, 3]}\n",
                    "  - lr_scheduler: {instance_name: lr}\n"
                    "    starting_epoch: 2\n    ending_epoch: 9\n");
  torch::optim::SGD opt(model_->parameters(), 1.0);
  const auto lrs = run(*s, opt, 0, 3);
  EXPECT_NEAR(lrs[0], 0.1, 1e-15);   // 0.1^(milestones ≤ 0)
  EXPECT_NEAR(lrs[2], 0.1, 1e-15);   // not stepped before the end of epoch 2
  EXPECT_NEAR(lrs[3], 0.01, 1e-15);  // 0.1^(milestones ≤ 3)
}

// distiller/policy.py LRPolicy.on_epoch_end with ExponentialLR: lr·gamma^(e + 1).
TEST_F(LrPolicies, ExponentialLRFromEpoch10GivesGammaToThe11AtEpoch11) {
  auto s = schedule("  lr: {class: ExponentialLR, gamma: 0.95}\n",
                    "  - lr_scheduler: {instance_name: lr}\n"
                    "    starting_epoch: 10\n    ending_epoch: 30\n");
  torch::optim::SGD opt(model_->parameters(), 1.0);
  const auto lrs = run(*s, opt, 0, 12);
  EXPECT_DOUBLE_EQ(lrs[10], 1.0);
  EXPECT_NEAR(lrs[11], 0.5688000922764597, 1e-15);  // 0.95^11
  EXPECT_NEAR(lrs[12], 0.5688000922764597 * 0.95, 1e-15);
}

// distiller/scheduler.py on_epoch_end steps only the policies of that epoch: a scheduler that is
// not stepped leaves the rate alone, whatever its name.
TEST_F(LrPolicies, DisjointPoliciesDoNotOverwriteEachOther) {
  auto s = schedule(
      "  z_step: {class: StepLR, step_size: 2, gamma: 0.5}\n"
      "  a_exp: {class: ExponentialLR, gamma: 0.9}\n",
      "  - lr_scheduler: {instance_name: z_step}\n    starting_epoch: 0\n    ending_epoch: 5\n"
      "  - lr_scheduler: {instance_name: a_exp}\n    starting_epoch: 8\n    ending_epoch: 12\n");
  torch::optim::SGD opt(model_->parameters(), 1.0);
  const auto lrs = run(*s, opt, 0, 13);
  // z_step sets 0.5^((e + 1) // 2) after epochs 0-4; a_exp 0.9^(e + 1) after epochs 8-11.
  const std::vector<double> expected = {1.0,
                                        1.0,
                                        0.5,
                                        0.5,
                                        0.25,
                                        0.25,
                                        0.25,
                                        0.25,
                                        0.25,
                                        std::pow(0.9, 9),
                                        std::pow(0.9, 10),
                                        std::pow(0.9, 11),
                                        std::pow(0.9, 12),
                                        std::pow(0.9, 12)};
  ASSERT_EQ(lrs.size(), expected.size());
  for (size_t e = 0; e < lrs.size(); ++e) EXPECT_NEAR(lrs[e], expected[e], 1e-15) << "epoch " << e;
}

// distiller/config.py adds LR policies in file order after all others, and
// distiller/scheduler.py on_epoch_end steps them in that order: the last one listed wins.
TEST_F(LrPolicies, OverlappingPoliciesTheLastListedWins) {
  const std::string both =
      "  b_step: {class: StepLR, step_size: 1, gamma: 0.5}\n"
      "  a_exp: {class: ExponentialLR, gamma: 0.9}\n";
  const std::string step = "  - lr_scheduler: {instance_name: b_step}\n    epochs: [0, 1, 2]\n";
  const std::string exp = "  - lr_scheduler: {instance_name: a_exp}\n    epochs: [0, 1, 2]\n";
  torch::optim::SGD opt(model_->parameters(), 1.0);
  auto exp_last = run(*schedule(both, step + exp), opt, 0, 3);
  EXPECT_NEAR(exp_last[3], 0.729, 1e-15);  // 0.9^3
  set_lr(opt, 1.0);
  auto step_last = run(*schedule(both, exp + step), opt, 0, 3);
  EXPECT_DOUBLE_EQ(step_last[3], 0.125);  // 0.5^3
}

// torch ReduceLROnPlateau as distiller/policy.py LRPolicy steps it with
// kwargs['metrics'][mode], from image_classifier.py's {'min': vloss, 'max': top1}.
TEST_F(LrPolicies, ReduceLROnPlateauWatchesPrimaryMetricOrLoss) {
  const std::string plateau = "  plateau: {class: ReduceLROnPlateau, mode: MODE, patience: 0}\n";
  const std::string policy =
      "  - lr_scheduler: {instance_name: plateau}\n    starting_epoch: 0\n    ending_epoch: 9\n";
  auto with_mode = [&](const std::string& mode) {
    auto text = plateau;
    text.replace(text.find("MODE"), 4, mode);
    return schedule(text, policy);
  };
  // top-1 rises and so does the loss: mode max (top-1) keeps the rate, mode min (loss) cuts it
  // by 10 each epoch after the first.
  auto rising = [](int64_t e) {
    return std::map<std::string, double>{{"top1", 50.0 + e}, {"loss", 1.0 + e}};
  };
  torch::optim::SGD opt(model_->parameters(), 1.0);
  auto max_s = with_mode("max");
  max_s->set_validation_metric("top1", true);
  EXPECT_EQ(run(*max_s, opt, 0, 3, rising), (std::vector<double>{1.0, 1.0, 1.0, 1.0}));
  auto min_s = with_mode("min");
  min_s->set_validation_metric("top1", true);
  const auto cut = run(*min_s, opt, 0, 3, rising);
  EXPECT_NEAR(cut[3], 0.01, 1e-15);  // reduced after epochs 1 and 2

  // An optform with no validation loss (sr: psnr, ssim): mode min is refused with the way out.
  set_lr(opt, 1.0);
  auto sr = with_mode("min");
  const std::map<std::string, double> sr_metrics = {{"psnr", 30.0}, {"ssim", 0.9}};
  sr->on_epoch_begin(0, opt);
  try {
    sr->on_epoch_end(0, sr_metrics, opt);
    ADD_FAILURE() << "mode min without a validation loss was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "s.yaml:5: LR scheduler plateau has mode min, which watches the validation loss "
                 "'loss', but this run reports none (its metrics: psnr, ssim); use mode: max to "
                 "watch psnr");
  }
  // A primary metric better when lower cannot be watched by mode max.
  EXPECT_THROW(with_mode("max")->set_validation_metric("error", false), InputError);
}

// Resuming (distiller/apputils/checkpoint.py restores the optimizer and the scheduler) continues
// the same rates: the plateau's best and bad-epoch count travel in the scheduler state, and the
// last rate set is put back even when the optimizer starts afresh.
TEST_F(LrPolicies, ResumeMidScheduleGivesTheSameRates) {
  const std::string schedulers =
      "  plateau: {class: ReduceLROnPlateau, mode: max, factor: 0.5, patience: 1}\n"
      "  step: {class: StepLR, step_size: 3}\n";
  const std::string policies =
      "  - lr_scheduler: {instance_name: plateau}\n    starting_epoch: 0\n    ending_epoch: 6\n"
      "  - lr_scheduler: {instance_name: step}\n    starting_epoch: 6\n    ending_epoch: 10\n";
  auto flat = [](int64_t) { return std::map<std::string, double>{{"psnr", 10.0}}; };
  // Flat PSNR: bad epochs 1, 2 → ×0.5 after epoch 2; 1, 2 → ×0.5 after epoch 4; then StepLR sets
  // 0.1^((e + 1) // 3) after epochs 6-9.
  const std::vector<double> expected = {1.0,  1.0,  1.0,  0.5,   0.5,  0.25,
                                        0.25, 0.01, 0.01, 0.001, 0.001};
  torch::optim::SGD straight_opt(model_->parameters(), 1.0);
  const auto straight = run(*schedule(schedulers, policies), straight_opt, 0, 10, flat);
  ASSERT_EQ(straight.size(), expected.size());
  for (size_t e = 0; e < expected.size(); ++e)
    EXPECT_NEAR(straight[e], expected[e], 1e-15) << "epoch " << e;

  // Stop after epoch 3 (the plateau has one bad epoch), resume with a fresh optimizer.
  torch::optim::SGD first_opt(model_->parameters(), 1.0);
  auto first = schedule(schedulers, policies);
  auto lrs = run(*first, first_opt, 0, 3, flat);
  torch::serialize::OutputArchive out;
  first->save_state(out);
  std::stringstream buf;
  out.save_to(buf);
  torch::serialize::InputArchive in;
  in.load_from(buf);
  auto second = schedule(schedulers, policies);
  second->load_state(in);
  torch::optim::SGD second_opt(model_->parameters(), 1.0);
  const auto rest = run(*second, second_opt, 4, 10, flat);
  lrs.insert(lrs.end(), rest.begin(), rest.end());
  ASSERT_EQ(lrs.size(), expected.size());
  for (size_t e = 0; e < expected.size(); ++e)
    EXPECT_NEAR(lrs[e], expected[e], 1e-15) << "epoch " << e;
}

// Each class as a schedule steps it: the closed form at e + 1 after epoch e.
TEST_F(LrPolicies, CosineAnnealingWarmRestartsInASchedule) {
  auto s = schedule("  lr: {class: CosineAnnealingWarmRestarts, T_0: 2, T_mult: 2}\n",
                    "  - lr_scheduler: {instance_name: lr}\n    starting_epoch: 0\n"
                    "    ending_epoch: 9\n");
  torch::optim::SGD opt(model_->parameters(), 1.0);
  const auto lrs = run(*s, opt, 0, 4);
  // Epoch e trains with the closed form at e: 1, 0.5, restart 1, (1 + cos(π/4))/2, 0.5.
  EXPECT_DOUBLE_EQ(lrs[0], 1.0);
  EXPECT_NEAR(lrs[1], 0.5, 1e-15);
  EXPECT_NEAR(lrs[2], 1.0, 1e-15);
  EXPECT_NEAR(lrs[3], 0.8535533905932737, 1e-15);
  EXPECT_NEAR(lrs[4], 0.5, 1e-15);
}

}  // namespace igb::compress
