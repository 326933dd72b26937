// LR schedulers' options: from_yaml reads values and defaults, refuses bad values and unknown keys
// naming file:line, and hyperparams() loads back into a scheduler with the same rates.
#include "compress/lr_schedulers.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

#include "compress/yaml_reader.h"
#include "core/error.h"

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
}

TEST(LrSchedulerOptions, HyperparamsLoadBackIntoTheSameSchedule) {
  const std::map<std::string, std::string> specs = {
      {"StepLR", "step_size: 2"},
      {"MultiStepLR", "milestones: [2, 3]\ngamma: 0.3"},
      {"ExponentialLR", "gamma: 0.9"},
      {"CosineAnnealingLR", "T_max: 4\neta_min: 0.01"},
      {"PolynomialLR", "T_max: 5\npower: 2"},
      {"MultiStepMultiGammaLR", "milestones: [1, 3]\ngammas: [0.5, 0.2]"}};
  register_builtin_lr_schedulers();
  EXPECT_EQ(lr_scheduler_registry().names().size(), specs.size());
  for (const auto& [cls, text] : specs) {
    auto s = make(cls, text);
    const auto json = s->hyperparams();
    EXPECT_EQ(json.at("class"), cls);
    auto again = make(cls, json.dump());
    EXPECT_EQ(again->hyperparams(), json) << json.dump();
    for (int64_t k = 0; k < 8; ++k)
      EXPECT_DOUBLE_EQ(again->lr(0.2, k), s->lr(0.2, k)) << cls << " step " << k;
  }
  EXPECT_EQ(make("StepLR", "step_size: 2")->hyperparams(),
            nlohmann::json::parse(R"({"class": "StepLR", "step_size": 2, "gamma": 0.1})"));
  EXPECT_EQ(
      make("CosineAnnealingLR", "T_max: 4")->hyperparams(),
      nlohmann::json::parse(R"({"class": "CosineAnnealingLR", "T_max": 4.0, "eta_min": 0.0})"));
}

}  // namespace igb::compress
