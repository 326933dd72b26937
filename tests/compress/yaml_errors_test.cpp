// Schedule and config files: values of the wrong shape (nested lists), duplicate keys, AGP's
// sparsity range and policies outside the run's epochs are refused or warned about with file:line.
#include <gtest/gtest.h>

#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <fstream>

#include <sstream>

#include "compress/scheduler.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/yaml_reader.h"
#include "options/yaml_config.h"
#include "tests/support.h"

namespace igb::compress {

namespace {

// The message of the InputError loading `yaml` throws.
std::string schedule_error(const std::string& yaml) {
  torch::nn::Linear model(4, 2);
  try {
    CompressionScheduler::from_text(yaml, "s.yaml", *model, 0.1, nullptr);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

std::string agp(const std::string& initial, const std::string& final_sparsity,
                const std::string& weights = "[weight]") {
  return "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n    initial_sparsity: " +
         initial + "\n    final_sparsity: " + final_sparsity + "\n    weights: " + weights +
         "\npolicies:\n  - pruner: {instance_name: p}\n    starting_epoch: 0\n    ending_epoch: "
         "4\n";
}

std::string config_error(const std::string& yaml) {
  options::YamlConfig config("sr");
  config.set_file("c.yaml");
  std::istringstream in(yaml);
  try {
    config.from_config(in);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST(YamlErrors, NestedListsNameFileLineKeyAndExpectedType) {
  EXPECT_EQ(schedule_error(agp("0.1", "0.5", "[[weight]]")),
            "s.yaml:7: pruners.p (AutomatedGradualPruner).weights has the wrong type of value: "
            "expected a parameter name, got a list");
  EXPECT_EQ(schedule_error(agp("0.1", "[0.5]")),
            "s.yaml:6: pruners.p (AutomatedGradualPruner).final_sparsity has the wrong type of "
            "value: expected a number, got a list");
  EXPECT_EQ(schedule_error("version: [1]\npolicies: []\n"),
            "s.yaml:1: version has the wrong type of value: expected 1, got a list");
  EXPECT_EQ(schedule_error("version: 1\npruners:\n  p:\n    class: [AutomatedGradualPruner]\n"),
            "s.yaml:4: pruners.p.class must be a single value, not a list");
  EXPECT_EQ(schedule_error("version: 1\n[pruners]: {}\n"),
            "s.yaml:2: a top-level key must be a single value, not a list");
  // A policy's instance name and its epochs list, element by element.
  const std::string lr =
      "version: 1\nlr_schedulers:\n  lr: {class: StepLR, step_size: 2}\npolicies:\n";
  EXPECT_EQ(schedule_error(lr + "  - lr_scheduler: {instance_name: [lr]}\n    epochs: [1]\n"),
            "s.yaml:5: policy lr_scheduler.instance_name has the wrong type of value: expected a "
            "single value, got a list");
  EXPECT_EQ(schedule_error(lr + "  - lr_scheduler: {instance_name: lr}\n    epochs:\n      - 1\n"
                                "      - [2]\n"),
            "s.yaml:8: policy.epochs has the wrong type of value: expected an integer, got a list");
  EXPECT_EQ(schedule_error("version: 1\nregularizers:\n  r:\n    class: L1Regularizer\n"
                           "    reg_regims: {weight: [0.1]}\npolicies: []\n"),
            "s.yaml:5: regularizers.r (L1Regularizer).reg_regims has the wrong type of value: "
            "expected a number, got a list");
}

TEST(YamlErrors, DuplicateKeysNameBothLinesAtEveryDepth) {
  EXPECT_EQ(schedule_error("version: 1\npolicies: []\nversion: 1\n"),
            "s.yaml:3: duplicate key 'version' (lines 1 and 3); give each key once");
  EXPECT_EQ(schedule_error("version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
                           "    final_sparsity: 0.5\n    initial_sparsity: 0.1\n"
                           "    final_sparsity: 0.7\n"),
            "s.yaml:7: duplicate key 'pruners.p.final_sparsity' (lines 5 and 7); give each key "
            "once");
  EXPECT_EQ(schedule_error("version: 1\npolicies:\n  - pruner: {instance_name: p, instance_name: "
                           "q}\n    epochs: [0]\n"),
            "s.yaml:3: duplicate key 'policies[0].pruner.instance_name' (lines 3 and 3); give "
            "each key once");
  // Config files too.
  EXPECT_EQ(config_error("epochs: 2\nlr: 0.1\nepochs: 3\n"),
            "c.yaml:3: duplicate key 'epochs' (lines 1 and 3); give each key once");
  check_duplicate_keys(YAML::Load("a: {x: 1}\nb: {x: 1}\nc: [{x: 1}, {x: 2}]\n"), "ok.yaml");
}

TEST(YamlErrors, ConfigFileValuesOfTheWrongShapeNameLineAndKey) {
  EXPECT_EQ(config_error("model-arg: [[a]]\n"),
            "c.yaml:1: option 'model-arg' has the wrong type of value: expected a list of single "
            "values, got a list holding a list");
  EXPECT_EQ(config_error("epochs:\n  a: 1\n"),
            "c.yaml:1: option 'epochs' has the wrong type of value: expected a value or a list of "
            "values, got a mapping");
  EXPECT_EQ(config_error("epochs: 2\n[lr]: 0.1\n"),
            "c.yaml:2: an option name must be a single value, not a list");
  EXPECT_EQ(config_error("optform: [sr]\n"),
            "c.yaml:1: optform has the wrong type of value: expected a single value, got a list");
  EXPECT_EQ(config_error("optform: classify\n"),
            "c.yaml:1: the file is for --optform=classify, but this run is --optform=sr");
}

TEST(YamlErrors, AgpNeedsInitialBelowFinalSparsity) {
  EXPECT_EQ(schedule_error(agp("0.5", "0.5")),
            "s.yaml:5: pruners.p (AutomatedGradualPruner): initial_sparsity 0.5 must be below "
            "final_sparsity 0.5 (AGP raises sparsity from the one to the other)");
  EXPECT_EQ(schedule_error(agp("0.7", "0.25")),
            "s.yaml:5: pruners.p (AutomatedGradualPruner): initial_sparsity 0.7 must be below "
            "final_sparsity 0.25 (AGP raises sparsity from the one to the other)");
  EXPECT_EQ(
      schedule_error("version: 1\npruners:\n  p:\n    class: "
                     "L1RankedStructureParameterPruner_AGP\n    initial_sparsity: 0.3\n"
                     "    final_sparsity: 0.2\n    group_type: Rows\n    weights: [weight]\n"),
      "s.yaml:5: pruners.p (L1RankedStructureParameterPruner_AGP): initial_sparsity 0.3 "
      "must be below final_sparsity 0.2 (AGP raises sparsity from the one to the other)");
  torch::nn::Linear model(4, 2);
  EXPECT_NO_THROW(CompressionScheduler::from_text(agp("0", "0.5"), "s.yaml", *model, 0.1, nullptr));
}

TEST(YamlErrors, PoliciesOutsideTheRunsEpochsAreWarnedAbout) {
  torch::nn::Linear model(4, 2);
  Logger logger;
  auto s = CompressionScheduler::from_text(
      "version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n    initial_sparsity: 0\n"
      "    final_sparsity: 0.5\n    weights: [weight]\n"
      "lr_schedulers:\n  lr: {class: StepLR, step_size: 2}\n  late: {class: StepLR, step_size: 1}\n"
      "policies:\n"
      "  - pruner: {instance_name: p}\n    starting_epoch: 0\n    ending_epoch: 12\n"
      "  - lr_scheduler: {instance_name: lr}\n    epochs: [0, 9]\n"
      "  - lr_scheduler: {instance_name: late}\n    starting_epoch: 10\n    ending_epoch: 20\n",
      "s.yaml", *model, 0.1, &logger);
  testing::internal::CaptureStderr();
  s->set_epochs(10);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "warning: s.yaml:17: the lr_scheduler policy of 'late' starts at epoch 10, after the "
            "run's last epoch 9 (--epochs 10); it never acts\n"
            "warning: s.yaml:12: the pruner policy of 'p' acts until epoch 11, past the run's "
            "last epoch 9 (--epochs 10); it is cut short\n");
  testing::internal::CaptureStderr();
  s->set_epochs(30);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

TEST(YamlErrors, RepeatedWarningsAreSummarised) {
  std::string yaml = "version: 1\nlr_schedulers:\n";
  for (int i = 0; i < 12; ++i)
    yaml += "  lr" + std::to_string(10 + i) + ": {class: StepLR, step_size: 2}\n";
  yaml += "policies:\n  - lr_scheduler: {instance_name: lr10}\n    epochs: [1]\n";
  torch::nn::Linear model(4, 2);
  Logger logger;
  testing::internal::CaptureStderr();
  CompressionScheduler::from_text(yaml, "s.yaml", *model, 0.1, &logger);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "warning: s.yaml: 'lr11' is defined but no policy uses it\n"
            "warning: s.yaml: 'lr12' is defined but no policy uses it\n"
            "warning: s.yaml: 'lr13' is defined but no policy uses it\n"
            "warning: s.yaml: 'lr14' is defined but no policy uses it\n"
            "warning: s.yaml: 'lr15' is defined but no policy uses it\n"
            "warning: s.yaml: … and 6 more instances are defined but no policy uses them\n");
}

// distiller/config.py never reads `version`: a schedule without it loads, with a warning.
TEST(YamlLeniency, AScheduleWithoutVersionLoadsAsVersionOne) {
  torch::nn::Linear model(4, 2);
  Logger logger;
  const std::string text = agp("0.1", "0.5").substr(std::string("version: 1\n").size());
  testing::internal::CaptureStderr();
  auto s = CompressionScheduler::from_text(text, "s.yaml", *model, 0.1, &logger);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "warning: s.yaml: the schedule has no 'version'; it is read as version 1\n");
  EXPECT_EQ(s->named_params(), std::vector<std::string>{"weight"});
}

// distiller/pruning/automated_gradual_pruner.py takes `weights` as it comes: one name as a
// plain string names one parameter.
TEST(YamlLeniency, WeightsMayBeOneString) {
  torch::nn::Linear model(4, 2);
  auto s =
      CompressionScheduler::from_text(agp("0.1", "0.5", "weight"), "s.yaml", *model, 0.1, nullptr);
  EXPECT_EQ(s->named_params(), std::vector<std::string>{"weight"});
}

// Distiller's AlexNet and VGG wrap `features` in DataParallel, so its schedules name
// `features.module.3.weight`: every `module` segment is dropped, and the log says so.
TEST(YamlLeniency, ModuleSegmentsAnywhereAreStrippedAndLogged) {
  struct Net : torch::nn::Module {
    Net() {
      register_module("features",
                      torch::nn::Sequential(torch::nn::Linear(4, 4), torch::nn::ReLU(),
                                            torch::nn::Linear(4, 4), torch::nn::Linear(4, 2)));
    }
  } net;
  Logger logger;
  testing::internal::CaptureStderr();
  auto s = CompressionScheduler::from_text(
      "version: 1\npruners:\n  p:\n    class: SparsityLevelParameterPruner\n"
      "    levels: {features.module.3.weight: 0.5, module.features.0.weight: 0.5}\n"
      "policies:\n  - pruner: {instance_name: p}\n    epochs: [0]\n",
      "s.yaml", net, 0.1, &logger);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "s.yaml: parameter names read without their 'module' path segments (DataParallel "
            "wrappers): features.module.3.weight -> features.3.weight, module.features.0.weight -> "
            "features.0.weight\n");
  EXPECT_EQ(s->named_params(),
            (std::vector<std::string>{"features.0.weight", "features.3.weight"}));
}

TEST(YamlLeniency, AMisspeltKeyIsNamedEvenWhenARequiredKeyIsMissing) {
  EXPECT_EQ(schedule_error("version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
                           "    initial_sparsity: 0.1\n    finale_sparsity: 0.5\n"
                           "    weights: [weight]\n"),
            "s.yaml:6: unknown key 'finale_sparsity' in pruners.p (AutomatedGradualPruner); did "
            "you mean final_sparsity?");
  // Nothing like the missing key: it is reported missing.
  EXPECT_EQ(schedule_error("version: 1\npruners:\n  p:\n    class: AutomatedGradualPruner\n"
                           "    initial_sparsity: 0.1\n    weights: [weight]\n"),
            "s.yaml:4: pruners.p (AutomatedGradualPruner) is missing the key 'final_sparsity'");
  // Policies too.
  EXPECT_EQ(schedule_error("version: 1\nlr_schedulers:\n  lr: {class: StepLR, step_size: 2}\n"
                           "policies:\n  - lr_scheduler: {instance_name: lr}\n"
                           "    startng_epoch: 0\n    ending_epoch: 3\n"),
            "s.yaml:6: unknown key 'startng_epoch' in policy; did you mean starting_epoch?");
}

// A misspelt required key is named as the misspelling in every section that has one: pruners of
// each kind, regularizers, LR schedulers, extensions and quantizers (weigths → weights is one
// edit: two neighbours swapped).
TEST(YamlLeniency, AMisspeltRequiredKeyIsNamedInEverySection) {
  const std::string policy = "policies: []\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pruners:\n  p:\n    class: AutomatedGradualPruner\n    initial_sparsity: 0.1\n"
       "    final_sparsity: 0.5\n    weigths: [weight]\n",
       "s.yaml:7: unknown key 'weigths' in pruners.p (AutomatedGradualPruner); did you mean "
       "weights?"},
      {"pruners:\n  p:\n    class: L1RankedStructureParameterPruner\n    group_type: Filters\n"
       "    desired_sparsity: 0.5\n    weigths: [weight]\n",
       "s.yaml:7: unknown key 'weigths' in pruners.p (L1RankedStructureParameterPruner); did you "
       "mean weights?"},
      {"pruners:\n  p:\n    class: L1RankedStructureParameterPruner_AGP\n    initial_sparsity: "
       "0.1\n"
       "    final_sparsity: 0.5\n    group_tpye: Filters\n    weights: [weight]\n",
       "s.yaml:7: unknown key 'group_tpye' in pruners.p (L1RankedStructureParameterPruner_AGP); "
       "did "
       "you mean group_type?"},
      {"pruners:\n  p:\n    class: SensitivityPruner\n    sensitivites: {weight: 0.5}\n",
       "s.yaml:5: unknown key 'sensitivites' in pruners.p (SensitivityPruner); did you mean "
       "sensitivities?"},
      {"regularizers:\n  r:\n    class: L1Regularizer\n    reg_regim: {weight: 0.1}\n",
       "s.yaml:5: unknown key 'reg_regim' in regularizers.r (L1Regularizer); did you mean "
       "reg_regims?"},
      {"lr_schedulers:\n  l:\n    class: StepLR\n    step_szie: 2\n",
       "s.yaml:5: unknown key 'step_szie' in lr_schedulers.l (StepLR); did you mean step_size?"},
  };
  for (const auto& [yaml, message] : cases)
    EXPECT_EQ(schedule_error("version: 1\n" + yaml + policy), message) << yaml;
}

// No poison: a number that is not finite, or a strength below zero, is refused where it is read.
TEST(YamlErrors, NonFiniteNumbersAndNegativeStrengthsAreRefused) {
  EXPECT_EQ(schedule_error("version: 1\nlr_schedulers:\n  l:\n    class: StepLR\n"
                           "    step_size: 2\n    gamma: .nan\npolicies: []\n"),
            "s.yaml:6: lr_schedulers.l (StepLR).gamma has the wrong type of value: expected a "
            "finite number, got '.nan'");
  EXPECT_EQ(schedule_error(agp("0.1", ".inf")),
            "s.yaml:6: pruners.p (AutomatedGradualPruner).final_sparsity has the wrong type of "
            "value: expected a finite number, got '.inf'");
  EXPECT_EQ(schedule_error("version: 1\nregularizers:\n  r:\n    class: L1Regularizer\n"
                           "    reg_regims: {weight: -0.1}\npolicies: []\n"),
            "s.yaml:5: regularizers.r (L1Regularizer): a regularization strength must be >= 0, "
            "not -0.1");
  EXPECT_EQ(schedule_error("version: 1\nregularizers:\n  r:\n    class: GroupLassoRegularizer\n"
                           "    reg_regims: {weight: [-1, Rows]}\npolicies: []\n"),
            "s.yaml:5: regularizers.r (GroupLassoRegularizer): a regularization strength must be "
            ">= 0, not -1");
}

// A few lines of anchors can stand for a billion nodes: such a file is refused before anything
// walks it, in schedules and config files alike.
TEST(YamlErrors, AliasesExpandingPastTheLimitAreRefused) {
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int k = 0; k < 10; ++k) bomb += std::string(k ? ", " : "") + "*" + char(c - 1);
    bomb += "]\n";
  }
  const std::string expected =
      ": its anchors and aliases expand it to more than 1000000 nodes; write the values out "
      "instead";
  EXPECT_EQ(schedule_error("version: 1\n" + bomb + "policies: []\n"), "s.yaml" + expected);
  EXPECT_EQ(config_error(bomb), "c.yaml" + expected);
  // A few aliases that stay small are fine.
  EXPECT_EQ(config_error("a: &a [1, 2]\nb: *a\n"), "(no InputError)");
}

// YAML nested past yaml-cpp's depth limit is refused in our words (it was yaml-cpp's "bad file"),
// in schedules, config files and every file the one loader reads.
TEST(YamlErrors, NestingTooDeepIsInvalidYamlNamingTheFile) {
  const std::string deep = "a: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  const std::string schedule = schedule_error("version: 1\n" + deep);
  EXPECT_EQ(schedule.rfind("s.yaml:2: invalid YAML: ", 0), 0u) << schedule;
  const std::string config = config_error(deep);
  EXPECT_EQ(config.rfind("c.yaml:1: invalid YAML: ", 0), 0u) << config;
  test::TempDir tmp;
  std::ofstream(tmp / "deep.yaml") << deep;
  try {
    load_yaml_file(tmp / "deep.yaml");
    FAIL() << "nesting too deep was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind((tmp / "deep.yaml").string() + ":1: invalid YAML: ", 0), 0u) << what;
    EXPECT_EQ(what.find("bad file"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// Every number of every schedule class goes through the one finite check of YamlReader: a table
// of each class's real keys, each fed .nan, .inf, -.inf and 1e400 (beyond a double).
TEST(YamlErrors, EveryRealKeyOfEveryScheduleClassRefusesNonFiniteNumbers) {
  const std::vector<std::pair<std::string, std::string>> keys = {
      {"pruners",
       "class: AutomatedGradualPruner, initial_sparsity: V, final_sparsity: 0.5, "
       "weights: [weight]"},
      {"pruners",
       "class: AutomatedGradualPruner, initial_sparsity: 0.1, final_sparsity: V, "
       "weights: [weight]"},
      {"pruners",
       "class: L1RankedStructureParameterPruner, group_type: Filters, "
       "desired_sparsity: V, weights: [weight]"},
      {"pruners",
       "class: L1RankedStructureParameterPruner_AGP, group_type: Filters, "
       "initial_sparsity: V, final_sparsity: 0.5, weights: [weight]"},
      {"pruners", "class: MagnitudeParameterPruner, thresholds: {weight: V}"},
      {"pruners", "class: SensitivityPruner, sensitivities: {weight: V}"},
      {"pruners", "class: SparsityLevelParameterPruner, levels: {weight: V}"},
      {"pruners",
       "class: SplicingPruner, sensitivities: {weight: 0.5}, low_thresh_mult: V, "
       "hi_thresh_mult: 0.7"},
      {"pruners",
       "class: RandomLevelStructureParameterPruner, group_type: Filters, "
       "sparsity_range: [0.1, V], weights: [weight]"},
      {"regularizers", "class: L1Regularizer, reg_regims: {weight: V}"},
      {"regularizers", "class: GroupLassoRegularizer, reg_regims: {weight: [V, Rows]}"},
      {"quantizers",
       "class: PACTQuantizer, bits_activations: 4, bits_weights: 4, "
       "act_clip_init_val: V"},
      {"quantizers",
       "class: PACTQuantizer, bits_activations: 4, bits_weights: 4, "
       "act_clip_decay: V"},
      {"lr_schedulers", "class: StepLR, step_size: 2, gamma: V"},
      {"lr_schedulers", "class: ExponentialLR, gamma: V"},
      {"lr_schedulers", "class: MultiStepLR, milestones: [2], gamma: V"},
      {"lr_schedulers", "class: CosineAnnealingLR, T_max: 4, eta_min: V"},
      {"lr_schedulers", "class: PolynomialLR, T_max: 4, power: V"},
      {"lr_schedulers", "class: MultiStepMultiGammaLR, milestones: [2], gammas: [V]"},
      {"lr_schedulers", "class: ReduceLROnPlateau, factor: V"},
  };
  for (const auto& [section, body] : keys)
    for (const std::string value : {".nan", ".inf", "-.inf", "1e400"}) {
      std::string b = body;
      b.replace(b.find('V'), 1, value);
      const std::string yaml = "version: 1\n" + section + ":\n  x: {" + b + "}\npolicies: []\n";
      const std::string what = schedule_error(yaml);
      EXPECT_NE(what.find("has the wrong type of value: expected a finite number"),
                std::string::npos)
          << yaml << "\n-> " << what;
    }
}

}  // namespace igb::compress
