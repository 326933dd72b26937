// The quantizer registry (Distiller's classes recognised and refused), the quantizers' options as
// Distiller's YAML writes them, and the per-module bits their overrides resolve to.
#include "compress/quantizer.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "compress/post_train_quantizer.h"
#include "compress/quantization_state.h"
#include "compress/scheduler.h"
#include "core/activation.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/yaml_reader.h"
#include "graph/summary_graph.h"
#include "models/model.h"
#include "models/model_from_checkpoint.h"
#include "models/trainer.h"
#include "tests/support.h"

namespace igb::compress {

namespace {

std::string schedule_error(const std::string& quantizers, torch::nn::Module* model = nullptr) {
  torch::nn::Linear linear(4, 2);
  try {
    CompressionScheduler::from_text("version: 1\nquantizers:\n" + quantizers + "policies: []\n",
                                    "q.yaml", model ? *model : *linear, 0.1, nullptr);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// A residual block's layers: conv1 → bn1 → relu → conv2.
struct BlockImpl : torch::nn::Module {
  BlockImpl() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 2, 3)));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(2));
    relu = register_module("relu", Activation(ActivationKind::kReLU));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 2, 3)));
  }
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  Activation relu{nullptr};
};
TORCH_MODULE(Block);

// conv1, layer1.{0,1}.{conv1,bn1,relu,conv2}, prelu, fc.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 2, 3)));
    auto layer1 = register_module("layer1", std::make_shared<torch::nn::Module>());
    layer1->register_module("0", Block());
    layer1->register_module("1", Block());
    register_module("prelu", Activation(ActivationKind::kPReLU));
    register_module("fc", torch::nn::Linear(2, 2));
  }
};
TORCH_MODULE(Net);

struct Read {
  nlohmann::json options;
  std::vector<std::string> warnings;
};

Read read(const std::string& cls, const std::string& body, torch::nn::Module& model) {
  const YAML::Node node = YAML::Load(body);
  YamlReader r(node, "q.yaml", "quantizers.q (" + cls + ")");
  Read out;
  out.options = read_quantizer_options(cls, r, model, &out.warnings);
  r.finish();
  return out;
}

std::string read_error(const std::string& cls, const std::string& body) {
  Net net;
  try {
    read(cls, body, *net);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST(Quantizers, RegistryBuildsDistillersQatClassesAndRefusesWrpn) {
  register_builtin_quantizers();
  EXPECT_EQ(quantizer_registry().names(),
            (std::vector<std::string>{"DorefaQuantizer", "PACTQuantizer",
                                      "QuantAwareTrainRangeLinearQuantizer", "WRPNQuantizer"}));
  for (const auto& n : quantizer_registry().names())
    EXPECT_EQ(static_cast<bool>(quantizer_registry().get(n).make), n != "WRPNQuantizer") << n;
  EXPECT_NE(quantizer_registry().entry("WRPNQuantizer").help.find("not available in this build"),
            std::string::npos);
}

TEST(Quantizers, UnknownAndUnavailableClassesAreRefused) {
  EXPECT_EQ(schedule_error("  q:\n    class: WRPNQuantizer\n"),
            "q.yaml:4: quantizer q (WRPNQuantizer): this class is not available in this build");
  EXPECT_EQ(
      schedule_error("  q:\n    class: LinearQuantizer\n"),
      "q.yaml:4: unknown quantizer class 'LinearQuantizer'; valid: DorefaQuantizer, PACTQuantizer, "
      "QuantAwareTrainRangeLinearQuantizer, WRPNQuantizer");
  EXPECT_EQ(schedule_error("  q:\n    class: DorefaQuantizer\n    bits_weight: 4\n"),
            "q.yaml:5: unknown key 'bits_weight' in quantizers.q (DorefaQuantizer); valid keys: "
            "class, quantize_bias, bits_activations, bits_weights, bits_bias, overrides, "
            "bits_overrides; did you mean bits_weights?");
}

// distiller/quantization/quantizer.py Quantizer.__init__: the combined (^p1$)|(^p2$)… regex, so the
// first pattern in file order matching the whole name wins.
TEST(Quantizers, OverridesResolveByFirstWholeMatch) {
  QuantizerOptions o;
  o.bits = {8, 8, 32};
  o.overrides = {{"conv1", {0, 0, 0}, ""},
                 {"layer1\\..*", {4, 2, 32}, ""},
                 {"layer1\\.0\\.conv2", {6, 6, 6}, ""}};
  const auto& q = o;
  EXPECT_EQ(q.bits_for("conv1").weights, 0);
  EXPECT_EQ(q.bits_for("layer1.0.conv2").weights, 2);  // the earlier pattern wins
  EXPECT_EQ(q.bits_for("layer1.0.conv2").activations, 4);
  EXPECT_EQ(q.bits_for("layer2.conv1").weights, 8);  // whole-name match: "conv1" does not match it
  EXPECT_EQ(q.bits_for("fc").bias, 32);
  o.overrides = {{"layer1[", {4, 4, 4}, "q.yaml:7"}};
  EXPECT_THROW(o.bits_for("fc"), InputError);
}

// quantizer.py Quantizer.__init__: `self.overrides.get(name_to_match)` is taken before the regex
// group, so a key equal to the module name wins even over an earlier pattern; a key missing in an
// entry takes the quantizer's value; _add_qbits_entry keeps weight bits on Conv/Linear only.
TEST(Quantizers, OverridesFromYamlFirstMatchExactKeyAndDefaults) {
  Net net;
  auto r = read("DorefaQuantizer",
                "bits_activations: 4\nbits_weights: 3\noverrides:\n"
                "  'layer1\\..*': {bits_weights: 4}\n"
                "  'layer1\\.0\\.conv1': {bits_weights: null}\n",
                *net);
  const auto& bits = r.options["bits"];
  // layer1.0.conv1: the first pattern wins over the later (non-identical) one: acts 4 (default),
  // wts 4, bias null (DorefaQuantizer's bits_bias default).
  EXPECT_EQ(bits["layer1.0.conv1"],
            (nlohmann::json{{"bits_activations", 4}, {"bits_weights", 4}, {"bits_bias", nullptr}}));
  // bn1 is matched too but keeps only its activation bits (no weight bits on BatchNorm).
  EXPECT_EQ(bits["layer1.0.bn1"]["bits_weights"], nullptr);
  EXPECT_EQ(bits["layer1.0.bn1"]["bits_activations"], 4);
  EXPECT_EQ(bits["conv1"]["bits_weights"], 3);
  EXPECT_EQ(bits["fc"]["bits_weights"], 3);
  EXPECT_EQ(bits["prelu"]["bits_weights"], nullptr);  // a PReLU's slopes stay float
  EXPECT_TRUE(r.warnings.empty());

  // The exact key wins over the earlier pattern: conv1 stays float, conv2 of layer1 gets 4 bits.
  r = read("DorefaQuantizer",
           "bits_weights: 8\noverrides:\n  'conv.*': {bits_weights: 4}\n  conv1: {bits_weights: "
           "null}\n",
           *net);
  EXPECT_EQ(r.options["bits"]["conv1"]["bits_weights"], nullptr);
  EXPECT_EQ(r.options["bits"]["layer1.0.conv1"]["bits_weights"], 8);  // neither matches the name
  EXPECT_EQ(
      r.options["overrides"],
      (nlohmann::json{
          {{"conv.*", {{"bits_activations", 32}, {"bits_weights", 4}, {"bits_bias", nullptr}}}},
          {{"conv1",
            {{"bits_activations", 32}, {"bits_weights", nullptr}, {"bits_bias", nullptr}}}}}));
}

// quantizer.py: an override entry takes only bits_activations/weights/bias (filter_kwargs on the
// replacement function raises TypeError for others); null is None (not quantized).
TEST(Quantizers, OverrideErrorsNameFileAndLine) {
  EXPECT_EQ(read_error("DorefaQuantizer", "overrides:\n  fc:\n    foo: 3\n"),
            "q.yaml:3: unknown key 'foo' in quantizers.q (DorefaQuantizer).overrides.fc; valid "
            "keys: bits_activations, bits_weights, bits_bias; did you mean bits_bias?");
  EXPECT_EQ(
      read_error("DorefaQuantizer", "overrides:\n  fc: {}\n  layer9\\..*: {bits_weights: 2}\n"),
      "q.yaml:3: override 'layer9\\..*' matches no module of the model; closest module "
      "names: layer1.0, layer1.1, layer1");
  EXPECT_EQ(read_error("DorefaQuantizer", "bits_weights: 0\n"),
            "q.yaml:1: quantizers.q (DorefaQuantizer).bits_weights must be 1 to 32 bits, or null "
            "for floating point; got 0");
  EXPECT_EQ(read_error("DorefaQuantizer", "overrides:\n  'layer1[': {bits_weights: 2}\n")
                .rfind("q.yaml:2: override 'layer1[' is not a valid regular expression", 0),
            0u);
  EXPECT_EQ(read_error("DorefaQuantizer", "overrides:\n  fc: 4\n"),
            "q.yaml:2: quantizers.q (DorefaQuantizer).overrides.fc must be a mapping of "
            "bits_activations, bits_weights, bits_bias");
}

TEST(Quantizers, OverrideMatchingOnlyUnchangedModulesWarns) {
  Net net;
  const auto r =
      read("DorefaQuantizer", "overrides:\n  'layer1\\.0\\.bn1': {bits_weights: 2}\n", *net);
  EXPECT_EQ(r.warnings,
            (std::vector<std::string>{
                "q.yaml:2: override 'layer1\\.0\\.bn1' matches only modules a quantizer leaves "
                "unchanged (no weight layer or ReLU)"}));
}

// Distiller's defaults: clipped_linear.py DorefaQuantizer/PACTQuantizer (32, 32, None) and
// range_linear.py QuantAwareTrainRangeLinearQuantizer (32, 32, 32, SYMMETRIC, 0.999, False, True).
TEST(Quantizers, ClassDefaultsAreDistillers) {
  Net net;
  auto r = read("PACTQuantizer", "{}", *net);
  EXPECT_EQ(r.options["bits_activations"], 32);
  EXPECT_EQ(r.options["bits_weights"], 32);
  EXPECT_EQ(r.options["bits_bias"], nullptr);
  EXPECT_EQ(r.options["act_clip_init_val"], 8.0);
  EXPECT_EQ(r.options["act_clip_decay"], nullptr);
  r = read("PACTQuantizer", "act_clip_init_val: 6\nact_clip_decay: 0.0001\n", *net);
  EXPECT_EQ(r.options["act_clip_init_val"], 6.0);
  EXPECT_EQ(r.options["act_clip_decay"], 0.0001);
  r = read("QuantAwareTrainRangeLinearQuantizer", "bits_activations: 7\n", *net);
  EXPECT_EQ(r.options["bits_bias"], 32);
  EXPECT_EQ(r.options["mode"], "SYMMETRIC");
  EXPECT_EQ(r.options["ema_decay"], 0.999);
  EXPECT_EQ(r.options["per_channel_wts"], false);
  EXPECT_EQ(r.options["quantize_inputs"], true);
  EXPECT_EQ(r.options["num_bits_inputs"], 7);  // bits_activations when absent
  r = read("QuantAwareTrainRangeLinearQuantizer",
           "mode: {activations: SYMMETRIC_RESTRICTED, weights: SYMMETRIC}\nper_channel_wts: "
           "true\nnum_bits_inputs: 8\nema_decay: 0.9\n",
           *net);
  EXPECT_EQ(r.options["per_channel_wts"], true);
  EXPECT_EQ(r.options["num_bits_inputs"], 8);
  EXPECT_EQ(r.options["ema_decay"], 0.9);
  EXPECT_EQ(read_error("QuantAwareTrainRangeLinearQuantizer", "mode: ASYMMETRIC_UNSIGNED\n"),
            "q.yaml:1: quantizers.q (QuantAwareTrainRangeLinearQuantizer).mode ASYMMETRIC_UNSIGNED "
            "is not supported: TensorRT's Q/DQ quantization is symmetric; use SYMMETRIC");
  EXPECT_EQ(read_error("PACTQuantizer", "act_clip_init_val: 0\n"),
            "q.yaml:1: quantizers.q (PACTQuantizer).act_clip_init_val must be > 0 (the initial "
            "clipping value)");
}

// Older Distiller (quantizer.py before bits_bias): quantize_bias=True quantized each bias with its
// layer's weight bits, and bits_overrides entries used acts/wts (preact_resnet20_cifar_pact.yaml).
TEST(Quantizers, LegacyKeysAreReadWithAWarning) {
  Net net;
  auto r =
      read("DorefaQuantizer", "bits_activations: 8\nbits_weights: 8\nquantize_bias: True\n", *net);
  EXPECT_EQ(r.options["bits_bias"], 8);
  EXPECT_EQ(r.options["bits"]["fc"]["bits_bias"], 8);
  EXPECT_EQ(r.warnings,
            (std::vector<std::string>{"q.yaml:3: quantizers.q (DorefaQuantizer).quantize_bias is "
                                      "Distiller's older key; read as bits_bias: bits_weights (per "
                                      "override too)"}));
  r = read("PACTQuantizer",
           "bits_activations: 4\nbits_weights: 3\nquantize_bias: true\nbits_overrides:\n"
           "  conv1: {wts: null, acts: null}\n  fc: {wts: 5}\n",
           *net);
  EXPECT_FALSE(r.options["bits"].contains("conv1"));  // all float: not listed
  // fc: wts 5, acts the default 4, bias its own weight bits.
  EXPECT_EQ(r.options["bits"]["fc"],
            (nlohmann::json{{"bits_activations", 4}, {"bits_weights", 5}, {"bits_bias", 5}}));
  EXPECT_EQ(r.options["bits"]["layer1.1.conv2"]["bits_bias"], 3);
  EXPECT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(read_error("DorefaQuantizer", "bits_overrides: {}\noverrides: {}\n"),
            "q.yaml:1: quantizers.q (DorefaQuantizer) gives both overrides and Distiller's older "
            "bits_overrides; keep overrides");
  EXPECT_EQ(read_error("DorefaQuantizer", "bits_bias: 4\nquantize_bias: true\n"),
            "q.yaml:2: quantizers.q (DorefaQuantizer) gives both bits_bias and Distiller's older "
            "quantize_bias; keep bits_bias");
  // The current overrides take only the full names, as latest Distiller.
  EXPECT_NE(read_error("DorefaQuantizer", "overrides:\n  fc: {wts: 4}\n").find("unknown key 'wts'"),
            std::string::npos);
}

namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A schedule with one quantizer (its mapping `body`, indented by 4) and its policy.
std::string quant_schedule(const std::string& cls, const std::string& body, int start = 0) {
  return "version: 1\nquantizers:\n  q:\n    class: " + cls + "\n" + body +
         "policies:\n  - quantizer:\n      instance_name: q\n    starting_epoch: " +
         std::to_string(start) + "\n    ending_epoch: 200\n    frequency: 1\n";
}

// One SGD step through the scheduler's hooks, as the Trainer calls them.
void train_step(torch::nn::Module& model, const std::function<at::Tensor(const at::Tensor&)>& fwd,
                CompressionScheduler& s, torch::optim::Optimizer& opt, const at::Tensor& x) {
  MinibatchInfo info{0, 0, 1};
  s.on_minibatch_begin(info, opt);
  auto loss = fwd(x).pow(2).mean();
  loss = s.before_backward_pass(info, loss, opt);
  opt.zero_grad();
  loss.backward();
  s.before_parameter_optimization(info, opt);
  opt.step();
  s.on_minibatch_end(info, opt);
}

int64_t distinct(const at::Tensor& t) { return std::get<0>(at::_unique(t.flatten())).numel(); }

}  // namespace

// clipped_linear.py PACTQuantizer: ReLUs replaced (clip_val = act_clip_init_val), DoReFa weights
// through float_weight; policy.py QuantizationPolicy re-quantizes at on_minibatch_end.
TEST(Quantizers, PactTrainsResnet20WithQuantizedWeightsAndLearnedAlpha) {
  torch::manual_seed(0);
  models::register_builtin_models();
  auto model = models::create_model("resnet20_cifar", {});
  auto s = CompressionScheduler::from_text(
      quant_schedule(
          "PACTQuantizer",
          "    bits_activations: 4\n    bits_weights: 3\n    act_clip_init_val: 3\n"
          "    act_clip_decay: 0.0001\n    overrides:\n      conv1: {bits_weights: null, "
          "bits_activations: null}\n      fc: {bits_weights: null}\n"),
      "p.yaml", *model, 0.1, nullptr);
  ASSERT_NE(s->quantizer(), nullptr);
  const auto& targets = s->quantizer()->targets();
  EXPECT_EQ(targets.count("conv1"), 0u);
  EXPECT_EQ(targets.count("fc"), 0u);
  EXPECT_EQ(targets.at("layer1.0.conv1").weights, 3);
  EXPECT_EQ(targets.at("layer1.0.conv1").bias, 0);  // resnet convs have no bias
  EXPECT_EQ(targets.at("relu").activations, 4);     // the stem ReLU: defaults (conv1 is not "relu")
  EXPECT_EQ(targets.at("layer3.2.relu2").activations, 4);
  // 19 convs quantized (the stem conv stays float), 19 ReLUs replaced.
  int64_t convs = 0, relus = 0;
  for (const auto& [n, b] : targets) {
    convs += b.weights != 0;
    relus += b.activations != 0;
  }
  EXPECT_EQ(convs, 18);
  EXPECT_EQ(relus, 19);
  const auto buffers = model->named_buffers();
  EXPECT_NE(buffers.find("layer1.0.conv1.float_weight"), nullptr);
  EXPECT_EQ(buffers.find("conv1.float_weight"), nullptr);
  const auto params = model->named_parameters();
  ASSERT_NE(params.find("layer1.0.relu1.replacement.clip_val"), nullptr);
  EXPECT_FLOAT_EQ(params["layer1.0.relu1.replacement.clip_val"].item<float>(), 3.0f);

  // α in its own group: SGD lr 0.1, act_clip_decay 1e-4, zero gradient:
  // α = 3 − 0.1·(1e-4·3) = 2.99997, while the main group keeps --wd 5e-4.
  models::TrainConfig config;
  config.optimizer = "sgd";
  config.lr = 0.1;
  config.momentum = 0.9;
  config.weight_decay = 5e-4;
  auto groups = s->param_groups();
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].params.size(), 19u);
  auto opt = models::make_optimizer(config, model->parameters(), groups);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  EXPECT_EQ(opt->param_groups()[0].params().size(), model->parameters().size() - 19);
  EXPECT_DOUBLE_EQ(
      static_cast<torch::optim::SGDOptions&>(opt->param_groups()[1].options()).weight_decay(),
      1e-4);
  EXPECT_DOUBLE_EQ(
      static_cast<torch::optim::SGDOptions&>(opt->param_groups()[0].options()).weight_decay(),
      5e-4);
  {
    auto alpha_opt = models::make_optimizer(config, {}, groups);
    for (auto& a : groups[0].params) a.mutable_grad() = torch::zeros_like(a);
    alpha_opt->step();
    EXPECT_NEAR(groups[0].params[0].item<double>(), 2.99997, 1e-6);
    torch::NoGradGuard g;
    for (auto& a : groups[0].params) a.fill_(3.0), a.mutable_grad() = at::Tensor();
  }

  model->train();
  const auto x = torch::randn({4, 3, 32, 32});
  auto fwd = [&](const at::Tensor& in) { return model->forward(in); };
  const auto alpha_before = params["layer3.2.relu2.replacement.clip_val"].item<double>();
  const auto master_before = buffers["layer2.0.conv2.float_weight"].clone();
  for (int i = 0; i < 2; ++i) train_step(*model, fwd, *s, *opt, x);
  // Weights stay on the 3-bit DoReFa grid (at most 2^3 values), the masters moved off it.
  EXPECT_LE(distinct(params["layer2.0.conv2.weight"]), 8);
  EXPECT_GT(distinct(buffers["layer2.0.conv2.float_weight"]), 8);
  EXPECT_FALSE(torch::equal(buffers["layer2.0.conv2.float_weight"], master_before));
  EXPECT_GT(distinct(params["conv1.weight"]), 8);  // overridden to float
  EXPECT_NE(params["layer3.2.relu2.replacement.clip_val"].item<double>(), alpha_before);
  const auto scalars = s->epoch_scalars();
  const auto alpha = std::find_if(scalars.begin(), scalars.end(), [](const EpochScalar& e) {
    return e.column == "alpha/layer3.2.relu2";
  });
  ASSERT_NE(alpha, scalars.end());
  EXPECT_EQ(alpha->tag, "quantization/alpha/layer3.2.relu2");
  EXPECT_EQ(alpha->value, params["layer3.2.relu2.replacement.clip_val"].item<double>());
}

// --int8-weights 7: weights whose integers fit 7 bits when the quantizer is built. A symmetric
// range-linear grid of 8 bits becomes one of 7 (±63), DoReFa's of 7 or 8 one of 6 (odd integers
// within ±63); other widths and float layers are kept, and a class with symmetric activations
// (whose pairs fit 16 bits already) is left alone when only unsigned ones are asked.
TEST(Quantizers, Int8WeightsNarrowsTheWeightGridsToIntegersWithin63) {
  QuantizerOptions o;
  o.bits = {8, 8, 32};
  o.overrides = {{"conv1", {8, QuantBits::kFloat, QuantBits::kFloat}, ""},
                 {"layer1\\..*", {8, 4, 32}, ""},
                 {"layer2\\..*", {8, 7, 32}, ""},
                 {"fc", {8, 8, 32}, ""}};
  QuantizerOptions dorefa = o;
  EXPECT_TRUE(o.narrow_weights(8, 7));
  EXPECT_EQ(o.bits.weights, 7);
  EXPECT_EQ(o.bits.activations, 8);
  EXPECT_EQ(o.overrides[0].bits.weights, QuantBits::kFloat);
  EXPECT_EQ(o.overrides[1].bits.weights, 4);
  EXPECT_EQ(o.overrides[2].bits.weights, 7);
  EXPECT_EQ(o.overrides[3].bits.weights, 7);
  EXPECT_FALSE(o.narrow_weights(8, 7));  // nothing 8-bit is left
  EXPECT_TRUE(dorefa.narrow_weights(7, 6));
  EXPECT_EQ(dorefa.bits.weights, 6);
  EXPECT_EQ(dorefa.overrides[1].bits.weights, 4);
  EXPECT_EQ(dorefa.overrides[2].bits.weights, 6);

  torch::manual_seed(0);
  models::register_builtin_models();
  const std::string body =
      "    bits_activations: 8\n    bits_weights: 8\n    overrides:\n"
      "      fc: {bits_weights: 4}\n";
  for (const std::string cls : {"PACTQuantizer", "QuantAwareTrainRangeLinearQuantizer"}) {
    for (const bool unsigned_only : {false, true}) {
      auto model = models::create_model("resnet20_cifar", {});
      auto s = CompressionScheduler::from_text(quant_schedule(cls, body), "q.yaml", *model, 0.1,
                                               nullptr, WeightNarrowing{7, unsigned_only});
      const bool pact = cls == "PACTQuantizer", narrowed = pact || !unsigned_only;
      const int64_t bits = !narrowed ? 8 : pact ? 6 : 7;
      SCOPED_TRACE(cls + (unsigned_only ? " (auto)" : " (7)"));
      EXPECT_EQ(s->quantizer()->narrowed_weight_bits(), narrowed ? bits : 0);
      EXPECT_EQ(s->quantizer()->targets().at("layer2.0.conv2").weights, bits);
      EXPECT_EQ(s->quantizer()->targets().at("fc").weights, 4);
      EXPECT_EQ(s->quantizer()->hyperparams()["bits_weights"], bits);
      // DoReFa's 6 bits hold at most 2^6 values, a symmetric 7-bit grid 2·63 + 1.
      const auto w = model->named_parameters()["layer2.0.conv2.weight"];
      const int64_t levels = pact ? (int64_t{1} << bits) : (int64_t{1} << bits) - 1;
      EXPECT_LE(distinct(w), levels);
      EXPECT_GT(distinct(w), levels / 2);
    }
  }
}

// policy.py QuantizationPolicy prepares the model when the schedule is loaded, so a policy must
// start at epoch 0; thinning needs the unquantized model (thinning.py knows no quantizer).
TEST(Quantizers, PolicyTimingAndCombinationsAreChecked) {
  models::register_builtin_models();
  auto model = models::create_model("resnet20_cifar", {});
  auto error = [&](const std::string& text) {
    try {
      CompressionScheduler::from_text(text, "q.yaml", *model, 0.1, nullptr);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no InputError)");
  };
  EXPECT_EQ(error(quant_schedule("DorefaQuantizer", "    bits_weights: 4\n", 1)),
            "q.yaml:7: the quantizer policy of 'q' starts at epoch 1; Distiller quantizes the "
            "model from the start (when the schedule is loaded), so it must start at epoch 0");
  const std::string thin =
      "extensions:\n  thin:\n    class: FilterRemover\n    thinning_func_str: remove_filters\n"
      "    arch: resnet20_cifar\n    dataset: cifar10\n";
  auto text = quant_schedule("DorefaQuantizer", "    bits_weights: 4\n") +
              "  - extension:\n      instance_name: thin\n    epochs: [1]\n";
  text.insert(text.find("policies:"), thin);
  EXPECT_EQ(error(text),
            "q.yaml:18: extension thin (FilterRemover) thins the model, which cannot be combined "
            "with quantizer q (thin before quantizing)");
}

// clipped_linear.py replaces nn.ReLU only and quantizer.py quantizes Conv2d/Conv3d/Linear/Embedding
// weights only: DoReFa on FSRCNN (PReLUs, a ConvTranspose2d last layer) quantizes the convs'
// weights and biases.
TEST(Quantizers, DistillersDorefaExampleLoadsOnFsrcnn) {
  const auto dir = std::filesystem::temp_directory_path() / "igb_quantizer_test";
  std::filesystem::create_directories(dir);
  Logger logger;
  logger.set_quiet(true);
  logger.open_file(dir / "log.txt");
  models::register_builtin_models();
  auto model = models::create_model("fsrcnn", {});
  const std::string path = std::string(IGB_SOURCE_DIR) +
                           "/tests/fixtures/python_tool_schedules/quantization_DoReFa.yaml";
  auto s = CompressionScheduler::from_file(path, *model, 0.1, &logger);
  const auto& targets = s->quantizer()->targets();
  EXPECT_EQ(targets.at("first_part.0").weights, 8);
  EXPECT_EQ(targets.at("first_part.0").bias, 8);  // quantize_bias: True
  EXPECT_EQ(targets.count("last_part"), 0u);
  for (const auto& [n, b] : targets) EXPECT_EQ(b.activations, 0) << n;  // no ReLU in FSRCNN
  const auto log = read_file(dir / "log.txt");
  EXPECT_NE(log.find("quantize_bias is Distiller's older key"), std::string::npos) << log;
  EXPECT_NE(log.find("activations left in floating point (DorefaQuantizer replaces ReLU only): "
                     "first_part.1 (prelu)"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("weights left in floating point (Distiller quantizes Conv2d, Conv3d, Linear "
                     "and Embedding weights only): last_part"),
            std::string::npos)
      << log;
  std::filesystem::remove_all(dir);
}

// quantizer.py Quantizer.__init__ stashes quantizer_metadata in the model so a resumed run can
// prepare it again: the checkpoint's record rebuilds the prepared model, the schedule adopts it,
// and a schedule quantizing differently is refused.
TEST(Quantizers, RecordedQuantizationIsAdoptedOnResume) {
  models::register_builtin_models();
  torch::manual_seed(0);
  const std::string text =
      quant_schedule("QuantAwareTrainRangeLinearQuantizer",
                     "    bits_activations: 6\n    bits_weights: 5\n    per_channel_wts: true\n");
  auto model = models::create_model("resnet20_cifar", {});
  auto s = CompressionScheduler::from_text(text, "q.yaml", *model, 0.1, nullptr);
  models::TrainConfig config;
  config.optimizer = "sgd";
  config.lr = 0.05;
  auto opt = models::make_optimizer(config, model->parameters(), s->param_groups());
  model->train();
  auto fwd = [&](const at::Tensor& in) { return model->forward(in); };
  train_step(*model, fwd, *s, *opt, torch::randn({2, 3, 32, 32}));
  const auto record = s->quantization();
  EXPECT_EQ(record["class"], "QuantAwareTrainRangeLinearQuantizer");
  EXPECT_EQ(
      record["bits"]["layer1.0.conv1"],
      (nlohmann::json{{"bits_activations", nullptr}, {"bits_weights", 5}, {"bits_bias", nullptr}}));
  EXPECT_EQ(record["bits"]["layer1.0.relu1"]["bits_activations"], 6);

  auto again = models::create_model("resnet20_cifar", {});
  restore_quantization(*again, record);
  {
    torch::NoGradGuard g;
    auto to = again->named_parameters();
    for (const auto& p : model->named_parameters()) to[p.key()].copy_(p.value());
    auto tb = again->named_buffers();
    for (const auto& b : model->named_buffers()) tb[b.key()].copy_(b.value());
  }
  auto resumed = CompressionScheduler::from_text(text, "q.yaml", *again, 0.1, nullptr);
  torch::serialize::OutputArchive out;
  s->save_state(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream is(bytes.str());
  in.load_from(is);
  resumed->load_state(in);
  model->eval();
  again->eval();
  const auto x = torch::randn({2, 3, 32, 32});
  EXPECT_TRUE(torch::equal(model->forward(x), again->forward(x)));

  auto other = models::create_model("resnet20_cifar", {});
  restore_quantization(*other, record);
  try {
    CompressionScheduler::from_text(
        quant_schedule("QuantAwareTrainRangeLinearQuantizer",
                       "    bits_activations: 6\n    bits_weights: 4\n    per_channel_wts: true\n"),
        "q.yaml", *other, 0.1, nullptr);
    ADD_FAILURE() << "a model quantized to 5 bits adopted by a 4-bit schedule";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "quantizer q (QuantAwareTrainRangeLinearQuantizer): layer conv1: "),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("5 bits; the schedule asks for 4"), std::string::npos)
        << e.what();
  }
}

// range_linear.py QuantAwareTrainRangeLinearQuantizer with quantize_inputs (its default): the
// model's forward passes the input through inputs_quant = FakeLinearQuantization(num_bits_inputs,
// ema_decay) before the first layer. Every other layer is float here, so the model equals its float
// twin fed the hand-quantized input.
TEST(Quantizers, QatQuantizesTheModelInputOnItsGrid) {
  models::register_builtin_models();
  torch::manual_seed(0);
  auto model = models::create_model("simplenet_cifar", {});
  torch::manual_seed(0);
  auto twin = models::create_model("simplenet_cifar", {});
  auto s = CompressionScheduler::from_text(
      quant_schedule("QuantAwareTrainRangeLinearQuantizer",
                     "    bits_activations: null\n    bits_weights: null\n    bits_bias: null\n"
                     "    ema_decay: 0.9\n    num_bits_inputs: 4\n"),
      "q.yaml", *model, 0.1, nullptr);
  ASSERT_TRUE(model_input_quant(*model));
  EXPECT_TRUE(model->named_buffers().contains("inputs_quant.tracked_max"));
  EXPECT_TRUE(model->named_modules().contains("inputs_quant"));

  // Each input element is one of five values; x2 has a larger maximum, 4.
  const auto values = torch::tensor({-0.5f, 0.3f, 2.0f, 0.5f, 1.2f});
  const auto shape = model->input_shape();
  const auto pattern = torch::arange(3 * 32 * 32) % 5;
  const auto x = values.index({pattern}).reshape(shape);
  auto x2 = x.clone();
  x2.view(-1)[1] = 4.0f;
  model->eval();
  twin->eval();
  // One EMA update through the model's forward (only the input quantizer in training mode):
  // biased = 0.1·v, unbiased = biased/(1 − 0.9) = v, so the range is the batch's [−0.5, 2].
  model_input_quant(*model)->train();
  {
    torch::NoGradGuard no_grad;
    model->forward(x);
  }
  model_input_quant(*model)->eval();
  EXPECT_FLOAT_EQ(model_input_quant(*model)->tracked_min.item<float>(), -0.5f);
  EXPECT_FLOAT_EQ(model_input_quant(*model)->tracked_max.item<float>(), 2.0f);
  // 4 bits symmetric: n = 2^3 − 1 = 7, S = m/n = 2/7; x/S = [−1.75, 1.05, 7, 1.75, 4.2] rounds to
  // q = [−2, 1, 7, 2, 4].
  const auto xq_values = torch::tensor({-2.0f, 1.0f, 7.0f, 2.0f, 4.0f}) * (2.0f / 7.0f);
  const auto xq = xq_values.index({pattern}).reshape(shape);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(model_input_quant(*model)->forward(x), xq, 0, 1e-6));
  EXPECT_TRUE(torch::allclose(model->forward(x), twin->forward(xq), 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(model->forward(x), twin->forward(x), 1e-3, 1e-4));
  // A second batch with maximum 4: (0.9·0.2 + 0.1·4)/(1 − 0.81) = 0.58/0.19 = 3.0526316; the
  // minimum stays −0.5. The range is logged per epoch beside the ReLUs' ones.
  model_input_quant(*model)->train();
  model->forward(x2);
  EXPECT_NEAR(model_input_quant(*model)->tracked_max.item<float>(), 3.0526316f, 1e-5);
  EXPECT_FLOAT_EQ(model_input_quant(*model)->tracked_min.item<float>(), -0.5f);
  bool logged = false;
  for (const auto& e : s->epoch_scalars())
    if (e.column == "act_amax/inputs_quant") logged = std::abs(e.value - 3.0526316) < 1e-5;
  EXPECT_TRUE(logged);
}

// range_linear.py: quantize_inputs False (or num_bits_inputs None) adds no inputs_quant, so the
// input reaches the first layer unchanged.
TEST(Quantizers, QatWithoutQuantizeInputsLeavesTheInputBitIdentical) {
  models::register_builtin_models();
  for (const char* inputs : {"    quantize_inputs: false\n", "    num_bits_inputs: null\n"}) {
    torch::manual_seed(0);
    auto model = models::create_model("simplenet_cifar", {});
    torch::manual_seed(0);
    auto twin = models::create_model("simplenet_cifar", {});
    CompressionScheduler::from_text(
        quant_schedule("QuantAwareTrainRangeLinearQuantizer",
                       "    bits_activations: null\n    bits_weights: null\n"
                       "    bits_bias: null\n" +
                           std::string(inputs)),
        "q.yaml", *model, 0.1, nullptr);
    EXPECT_FALSE(model_input_quant(*model)) << inputs;
    EXPECT_FALSE(model->named_modules().contains("inputs_quant")) << inputs;
    model->eval();
    twin->eval();
    torch::manual_seed(1);
    const auto x = torch::randn({2, 3, 32, 32});
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(model->forward(x), twin->forward(x))) << inputs;
  }
}

// range_linear.py's inputs_quant on an INT8 ResNet-20: the trace shows the input's clamp and
// fake-quantize ahead of the first conv with the float MACs; a checkpoint's record rebuilds it
// (apputils/checkpoint.py load_checkpoint prepares the model before its state_dict loads) and a
// resumed schedule adopts it, refusing other input bits.
TEST(Quantizers, QuantizedInputTracesAheadOfTheFirstConvAndRoundTrips) {
  models::register_builtin_models();
  torch::manual_seed(0);
  const std::string body =
      "    bits_activations: 8\n    bits_weights: 8\n    bits_bias: null\n"
      "    per_channel_wts: true\n";
  const std::string text = quant_schedule("QuantAwareTrainRangeLinearQuantizer", body);
  auto model = models::create_model("resnet20_cifar", {});
  auto s = CompressionScheduler::from_text(text, "q.yaml", *model, 0.1, nullptr);
  models::TrainConfig config;
  config.optimizer = "sgd";
  config.lr = 0.05;
  auto opt = models::make_optimizer(config, model->parameters(), s->param_groups());
  model->train();
  auto fwd = [&](const at::Tensor& in) { return model->forward(in); };
  train_step(*model, fwd, *s, *opt, torch::randn({2, 3, 32, 32}));
  const double m = model_input_quant(*model)->range();
  EXPECT_GT(m, 0);
  const auto record = s->quantization();
  EXPECT_EQ(record["num_bits_inputs"], 8);  // bits_activations when absent

  model->eval();
  const auto g = graph::SummaryGraph::build(*model, {1, 3, 32, 32}, fwd, "resnet20_cifar");
  size_t first_conv = 0;
  while (g.ops()[first_conv].op_kind != graph::OpKind::kConv) ++first_conv;
  ASSERT_EQ(first_conv, 2u);
  EXPECT_EQ(g.ops()[0].op_kind, graph::OpKind::kClamp);
  EXPECT_DOUBLE_EQ(g.ops()[0].clamp_max, m);
  EXPECT_EQ(g.ops()[1].op_kind, graph::OpKind::kFakeQuantize);
  EXPECT_EQ(g.ops()[1].quant_min, -127);
  EXPECT_EQ(g.ops()[1].quant_max, 127);
  EXPECT_FLOAT_EQ(static_cast<float>(g.ops()[1].scale), static_cast<float>(m / 127));
  int fake_quantize = 0;
  for (const auto& op : g.ops()) {
    EXPECT_NE(op.op_kind, graph::OpKind::kOther) << op.name << " " << op.kind;
    fake_quantize += op.op_kind == graph::OpKind::kFakeQuantize;
  }
  EXPECT_EQ(fake_quantize, 20);  // the input and the 19 ReLUs
  EXPECT_EQ(g.total_macs(), 40'551'040);

  test::TempDir tmp;
  CheckpointMeta meta;
  meta.optform = "classify";
  meta.model = "resnet20_cifar";
  meta.model_options = model->options_json();
  meta.quantization = record;
  save_checkpoint(tmp / "q.ckpt", meta, {model.get(), nullptr, nullptr, nullptr});
  auto rebuilt = models::model_from_checkpoint(Checkpoint::load(tmp / "q.ckpt"));
  ASSERT_TRUE(model_input_quant(*rebuilt));
  rebuilt->eval();
  torch::manual_seed(1);
  const auto x = torch::randn({2, 3, 32, 32});
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(rebuilt->forward(x), model->forward(x)));
  }
  EXPECT_EQ(model_input_quant(*rebuilt)->range(), m);
  auto before = model_input_quant(*rebuilt).get();
  CompressionScheduler::from_text(text, "q.yaml", *rebuilt, 0.1, nullptr);
  EXPECT_EQ(model_input_quant(*rebuilt).get(), before);  // adopted, not replaced
  try {
    CompressionScheduler::from_text(
        quant_schedule("QuantAwareTrainRangeLinearQuantizer", body + "    num_bits_inputs: 6\n"),
        "q.yaml", *rebuilt, 0.1, nullptr);
    ADD_FAILURE() << "an 8-bit input quantizer adopted by a 6-bit schedule";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "quantizer q (QuantAwareTrainRangeLinearQuantizer): the model input is quantized "
              "already with 8 bits and ema_decay 0.999000, not 6 bits and ema_decay 0.999000");
  }
}

// ---- post-training quantization (PostTrainLinearQuantizer) ----

namespace {

// conv (2 → 1 channels, 1x1, bias) → relu: forward = relu(conv(x)).
struct PtqNetImpl : torch::nn::Module {
  PtqNetImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 1, 1)));
    relu = register_module("relu", Activation(ActivationKind::kReLU));
    torch::NoGradGuard no_grad;
    conv->weight.copy_(torch::tensor({0.8f, -0.3f}).reshape({1, 2, 1, 1}));
    conv->bias.fill_(0.05f);
  }
  torch::Tensor forward(const torch::Tensor& x) { return relu(conv(x)); }
  torch::nn::Conv2d conv{nullptr};
  Activation relu{nullptr};
};
TORCH_MODULE(PtqNet);

PostTrainOptions ptq_options(const std::string& body) {
  const YAML::Node node = YAML::Load("class: PostTrainLinearQuantizer\n" + body);
  YamlReader r(node, "ptq.yaml", "quantizers.q");
  r.get<std::string>("class");
  auto o = PostTrainOptions::from_yaml(r);
  r.finish();
  return o;
}

std::string ptq_error(const std::string& body) {
  try {
    ptq_options(body);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

// The two calibration samples [0.3, -1.0] and [1.0, 0.5] as a (2, 2, 1, 1) batch.
torch::Tensor ptq_batch() { return torch::tensor({0.3f, -1.0f, 1.0f, 0.5f}).reshape({2, 2, 1, 1}); }

struct PtqRun {
  PtqNet net;
  std::unique_ptr<PostTrainLinearQuantizer> q;
  QuantStats stats;
};

// Builds the quantizer on a fresh PtqNet and calibrates it on ptq_batch().
std::unique_ptr<PtqRun> ptq_calibrated(const std::string& body) {
  auto run = std::make_unique<PtqRun>();
  auto net = run->net;
  run->q = std::make_unique<PostTrainLinearQuantizer>(
      ptq_options(body), *net, std::vector<int64_t>{1, 2, 1, 1},
      [net](const torch::Tensor& x) mutable { return net->forward(x); });
  run->stats = run->q->calibrate([](const auto& f) { f(ptq_batch()); });
  return run;
}

}  // namespace

// distiller/data_loggers/collector.py QuantCalibrationStatsCollector._activation_stats_cb.
TEST(PostTrainQuantization, StatsRecordsMinMaxPerSampleAveragesMeanStdAndB) {
  QuantStatsRecord r;
  const auto b1 = torch::tensor({1.f, -2.f, 3.f, 0.f, 4.f, -1.f}).reshape({2, 3});
  const auto b2 = torch::tensor({2.f, 2.f, -5.f}).reshape({1, 3});
  r.update(b1, 1);
  r.update(b2, 1);
  r.update(b1, 2);
  r.update(b2, 2);
  EXPECT_EQ(r.min, -5);
  EXPECT_EQ(r.max, 4);
  // Sample minima -2, -1, -5 and maxima 3, 4, 2, averaged over the three samples.
  EXPECT_DOUBLE_EQ(r.avg_min, -8.0 / 3);
  EXPECT_DOUBLE_EQ(r.avg_max, 3.0);
  // Mean of the nine values: 4/9; deviations (9x - 4)/9 = 5, -22, 23, -4, 32, -13, 14, 14, -49
  // ninths: variance = 64/9 - (4/9)^2 = 560/81, b = 176/81.
  EXPECT_DOUBLE_EQ(r.mean, 4.0 / 9);
  EXPECT_NEAR(r.std, std::sqrt(560.0) / 9, 1e-12);
  EXPECT_NEAR(r.b, 176.0 / 81, 1e-12);
  EXPECT_EQ(r.total_numel, 9);
  EXPECT_EQ(r.shape, "(2, 3)");
  // One value per sample: the batch's minimum and maximum count as one sample.
  QuantStatsRecord one;
  one.update(torch::tensor({1.f, 5.f, -2.f}).reshape({3, 1}), 1);
  EXPECT_EQ(one.avg_min, -2);
  EXPECT_EQ(one.avg_max, 5);
  EXPECT_EQ(one.samples, 1);
}

// distiller/quantization/range_linear.py _get_quant_params_from_stats_dict and q_utils.py.
TEST(PostTrainQuantization, ActivationRangesFollowClipModeAndMode) {
  QuantStatsRecord r;
  r.min = -3, r.max = 2.5, r.avg_min = -1, r.avg_max = 2, r.mean = 0.5, r.std = 1;
  const auto sym = LinearQuantMode::kSymmetric;
  // NONE: sat = max(|-3|, 2.5) = 3, Distiller's scale 127/3, step 3/127, signed range [-128, 127].
  auto q = act_quant_from_stats(r, 8, sym, ClipMode::kNone, 0);
  EXPECT_DOUBLE_EQ(q.scale, 1.0 / static_cast<double>(127.0f / 3.0f));
  EXPECT_EQ(q.zero_point, 128);
  // -3.1·127/3 = -131.2 → -128 (clamped); 1.0 → 42.33 → 42; 2.5 → 105.83 → 106.
  auto y = q.apply(torch::tensor({-3.1f, 1.0f, 2.5f}));
  EXPECT_NEAR(y[0].item<double>(), -128 * 3.0 / 127, 1e-6);
  EXPECT_NEAR(y[1].item<double>(), 42 * 3.0 / 127, 1e-6);
  EXPECT_NEAR(y[2].item<double>(), 106 * 3.0 / 127, 1e-6);
  // AVG: sat = max(|avg_min|, avg_max) = 2.
  EXPECT_NEAR(act_quant_from_stats(r, 8, sym, ClipMode::kAvg, 0).scale, 2.0 / 127, 1e-9);
  // N_STD with 1.5: [max(-3, 0.5 - 1.5), min(2.5, 0.5 + 1.5)] = [-1, 2] → sat 2.
  EXPECT_NEAR(act_quant_from_stats(r, 8, sym, ClipMode::kNStd, 1.5).scale, 2.0 / 127, 1e-9);
  // ASYMMETRIC_UNSIGNED: [-3, 2.5] onto 255 steps: scale 255/5.5, zero point round(-139.09) =
  // -139, i.e. ONNX zero point 139; ASYMMETRIC_SIGNED dequantizes to the same values.
  for (auto mode : {LinearQuantMode::kAsymmetricUnsigned, LinearQuantMode::kAsymmetricSigned}) {
    auto a = act_quant_from_stats(r, 8, mode, ClipMode::kNone, 0);
    EXPECT_NEAR(a.scale, 5.5 / 255, 1e-9);
    EXPECT_EQ(a.zero_point, 139);
  }
  // A zero range gives scale 1.
  QuantStatsRecord z;
  z.min = z.max = 0;
  EXPECT_EQ(act_quant_from_stats(z, 8, sym, ClipMode::kNone, 0).scale, 1.0);
}

// distiller/quantization/range_linear.py RangeLinearQuantParamLayerWrapper (weights per
// channel, bias on the accumulator scale, output requantized) and
// PostTrainLinearQuantizer._apply_activation_stats_fusions (conv followed by ReLU).
TEST(PostTrainQuantization, ConvOutputEqualsTheIntegerArithmetic) {
  auto run = ptq_calibrated("per_channel_wts: true\n");
  EXPECT_EQ(run->q->required_stats(),
            (std::vector<std::string>{"conv.inputs.0", "relu.inputs.0", "relu.output"}));
  run->q->prepare(run->stats, "calibration", nullptr);
  // Input range [-1, 1]: S_in = 1/127, x = [0.3, -1] → q_x = [38, -127].
  // Weights [0.8, -0.3], S_w = 0.8/127: q_w = [127, round(-47.625) = -48].
  EXPECT_NEAR(run->net->conv->weight[0][1][0][0].item<double>(), -48 * 0.8 / 127, 1e-7);
  // Bias 0.05 on S_acc = S_in·S_w = 0.8/16129: round(1008.06) = 1008.
  EXPECT_NEAR(run->net->conv->bias[0].item<double>(), 1008 * 0.8 / 16129, 1e-8);
  // Accumulator 127·38 + (-48)(-127) + 1008 = 11930 → y = 11930·0.8/16129 = 0.591729; the ReLU's
  // calibration range is [0, 0.7] (float outputs 0.59 and 0.70): round(0.591729·127/0.7) = 107.
  auto y = run->q->forward(ptq_batch().narrow(0, 0, 1));
  EXPECT_NEAR(y.item<double>(), 107 * 0.7 / 127, 1e-6);
}

// distiller/quantization/quantizer.py Quantizer.__init__ (overrides, None = not quantized).
TEST(PostTrainQuantization, NullOverridesLeaveTheModelBitIdentical) {
  PtqNet ref;
  const auto x = torch::randn({4, 2, 3, 3}, torch::Generator(at::detail::createCPUGenerator(7)));
  const auto expected = ref->forward(x);
  auto run = ptq_calibrated(
      "overrides:\n  conv: {bits_activations: null, bits_weights: null}\n"
      "  relu: {bits_activations: null}\n");
  EXPECT_TRUE(run->q->required_stats().empty());
  run->q->prepare(QuantStats{}, "no stats", nullptr);
  EXPECT_TRUE(torch::equal(run->q->forward(x), expected));
  // The exact name wins over an earlier pattern; a pattern matching no module is an error.
  auto o = ptq_options("overrides:\n  'c.*': {bits_weights: 4}\n  conv: {bits_weights: 6}\n");
  EXPECT_EQ(o.settings_for("conv").bits.weights, 6);
  EXPECT_EQ(o.settings_for("cx").bits.weights, 4);
  EXPECT_EQ(o.settings_for("relu").bits.weights, 8);
  PtqNet net;
  try {
    PostTrainLinearQuantizer bad(ptq_options("overrides:\n  nothing: {bits_weights: 4}\n"), *net,
                                 {1, 2, 1, 1},
                                 [net](const auto& t) mutable { return net->forward(t); });
    ADD_FAILURE() << "no error for an override matching nothing";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nothing"), std::string::npos) << e.what();
  }
}

TEST(PostTrainQuantization, StatsFileRoundTripsBitForBit) {
  test::TempDir tmp;
  auto first = ptq_calibrated("per_channel_wts: true\nclip_acts: AVG\n");
  write_quant_stats(first->stats, tmp.path() / "stats.yaml");
  const auto read = read_quant_stats(tmp.path() / "stats.yaml");
  EXPECT_EQ(read.order, first->stats.order);
  EXPECT_EQ(read.layers.at("relu").output->avg_max, first->stats.layers.at("relu").output->avg_max);
  EXPECT_EQ(read.layers.at("conv").inputs.at(0).std,
            first->stats.layers.at("conv").inputs.at(0).std);
  first->q->prepare(first->stats, "calibration", nullptr);
  auto second = ptq_calibrated("per_channel_wts: true\nclip_acts: AVG\n");
  second->q->prepare(read, "stats file", nullptr);
  const auto x = torch::randn({3, 2, 2, 2}, torch::Generator(at::detail::createCPUGenerator(3)));
  EXPECT_TRUE(torch::equal(first->q->forward(x), second->q->forward(x)));

  // A stats file lacking a layer the model needs names the layer and the file.
  QuantStats partial = read;
  partial.layers.erase("relu");
  auto third = ptq_calibrated("");
  try {
    third->q->prepare(partial, "stats file s.yaml", nullptr);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "stats file s.yaml has no statistics of layer relu (inputs.0), which post-training "
              "quantization needs");
  }
  // A file without std (Distiller's older layout) serves NONE and AVG but not N_STD.
  {
    std::ofstream f(tmp.path() / "old.yaml");
    for (const char* layer : {"conv", "relu"})
      f << layer << ":\n  inputs:\n    0: {min: -1, max: 1, avg_min: -1, avg_max: 1, mean: 0}\n"
        << "  output: {min: 0, max: 1, avg_min: 0, avg_max: 1, mean: 0.5}\n";
  }
  const auto old = read_quant_stats(tmp.path() / "old.yaml");
  ptq_calibrated("clip_acts: AVG\n")->q->prepare(old, "stats file old.yaml", nullptr);
  try {
    ptq_calibrated("clip_acts: N_STD\nclip_n_stds: 2\n")
        ->q->prepare(old, "stats file old.yaml", nullptr);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "stats file old.yaml has no std of layer conv, which clip_acts N_STD needs");
  }
  std::ofstream(tmp.path() / "bad.yaml") << "conv:\n  output:\n    min: 1\n    max: 2\n";
  try {
    read_quant_stats(tmp.path() / "bad.yaml");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("avg_min"), std::string::npos) << e.what();
  }
}

// conv (no bias) → bn → relu, as ResNet's blocks.
struct PtqBnNetImpl : torch::nn::Module {
  PtqBnNetImpl() {
    conv = register_module(
        "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(3));
    relu = register_module("relu", Activation(ActivationKind::kReLU));
    torch::NoGradGuard no_grad;
    bn->weight.copy_(torch::tensor({0.5f, 2.0f, -1.0f}));
    bn->bias.copy_(torch::tensor({0.1f, -0.2f, 0.3f}));
    bn->running_mean.copy_(torch::tensor({0.05f, -0.1f, 0.2f}));
    bn->running_var.copy_(torch::tensor({0.25f, 4.0f, 1.0f}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return relu(bn(conv(x))); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  Activation relu{nullptr};
};
TORCH_MODULE(PtqBnNet);

// distiller/model_transforms.py fold_batch_norms_inference, ahead of PostTrainLinearQuantizer.
TEST(PostTrainQuantization, BatchNormIsFoldedIntoItsConv) {
  torch::manual_seed(5);
  PtqBnNet net;
  net->eval();
  const auto w = net->conv->weight.detach().clone();
  const auto x = torch::randn({4, 2, 5, 5});
  const auto expected = net->forward(x).detach();
  // 16 bits: the folding is what is checked, the rounding is below 1e-4 here.
  PostTrainLinearQuantizer q(ptq_options("bits_activations: 16\nbits_parameters: 16\n"), *net,
                             {1, 2, 5, 5},
                             [net](const auto& t) mutable { return net->forward(t); });
  auto stats = q.calibrate([&](const auto& f) { f(x); });
  q.prepare(stats, "calibration", nullptr);
  // W' = W·γ/sqrt(var + eps) per output channel: γ/sqrt(var + eps) ≈ 1, 1, -1.
  const auto factor =
      torch::tensor({0.5f, 2.0f, -1.0f}) / (torch::tensor({0.25f, 4.0f, 1.0f}) + 1e-5).sqrt();
  EXPECT_TRUE(torch::allclose(net->conv->weight, w * factor.reshape({3, 1, 1, 1}), 1e-3, 1e-4));
  // The batch norm keeps only the folded bias: β − μ·γ/sqrt(var + eps).
  const auto bias =
      torch::tensor({0.1f, -0.2f, 0.3f}) - torch::tensor({0.05f, -0.1f, 0.2f}) * factor;
  EXPECT_TRUE(torch::allclose(net->bn->bias, bias, 1e-4, 1e-4));
  EXPECT_TRUE(torch::allclose(net->bn->weight, torch::ones({3})));
  EXPECT_TRUE(torch::allclose(q.forward(x), expected, 1e-3, 1e-3));
  EXPECT_EQ(q.layers_json()[0]["folded_bn"], "bn");
}

// distiller/quantization/range_linear.py _get_quant_params_from_tensor + q_utils.py
// asymmetric_linear_quantization_params and linear_quantize_clamp on a weight.
TEST(PostTrainQuantization, AsymmetricWeightsPerChannel) {
  // Row 0: [-0.5, 1.0] over 255 steps, S = 1.5/255, zero point round(0.5/S) = 85:
  // -0.5 → 0, 0 → 85, 1.0 → 255, 0.26/S = 44.2 → 44 + 85 = 129, i.e. 44·S.
  // Row 1: [0, 2] (the range takes 0 in), S = 2/255, zero point 0: 0.5/S = 63.75 → 64,
  // 0.3/S = 38.25 → 38, 1.1/S = 140.25 → 140.
  const auto w = torch::tensor({-0.5f, 0.0f, 1.0f, 0.26f, 0.5f, 2.0f, 0.3f, 1.1f}).reshape({2, 4});
  at::Tensor scale;
  const auto q = quantize_weight_ptq(w, 8, LinearQuantMode::kAsymmetricUnsigned, true, &scale);
  const double s0 = 1.5 / 255, s1 = 2.0 / 255;
  EXPECT_NEAR(scale[0].item<double>(), s0, 1e-9);
  EXPECT_NEAR(scale[1].item<double>(), s1, 1e-9);
  const std::vector<double> expected = {-85 * s0, 0,        170 * s0, 44 * s0,
                                        64 * s1,  255 * s1, 38 * s1,  140 * s1};
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_NEAR(q.reshape({-1})[i].item<double>(), expected[i], 1e-6) << i;
}

TEST(PostTrainQuantization, OptionsReadDistillersKeysAndRefuseOthers) {
  // In a training schedule the class is refused with where it belongs.
  EXPECT_EQ(schedule_error("  q:\n    class: PostTrainLinearQuantizer\n"),
            "q.yaml:4: quantizer q (PostTrainLinearQuantizer) quantizes a trained model for "
            "evaluation: give this file to igb-test --quantize-eval, not to a training run");
  auto o = ptq_options(
      "bits_activations: 6\nbits_parameters: 4\nbits_accum: 24\nmode: ASYMMETRIC_UNSIGNED\n"
      "per_channel_wts: True\nclip_acts: N_STD\nclip_n_stds: 2.5\nfp16: False\n"
      "scale_approx_mult_bits: null\n");
  EXPECT_EQ(o.quant.bits.activations, 6);
  EXPECT_EQ(o.quant.bits.weights, 4);
  EXPECT_EQ(o.quant.bits.bias, 24);
  EXPECT_EQ(o.mode_activations, LinearQuantMode::kAsymmetricUnsigned);
  EXPECT_EQ(o.mode_weights, LinearQuantMode::kAsymmetricUnsigned);
  EXPECT_TRUE(o.per_channel_wts);
  EXPECT_EQ(o.clip_acts, ClipMode::kNStd);
  EXPECT_EQ(*o.clip_n_stds, 2.5);
  auto d = ptq_options("");
  EXPECT_EQ(d.quant.bits, (QuantBits{8, 8, 32}));
  EXPECT_EQ(d.mode_activations, LinearQuantMode::kSymmetric);
  EXPECT_EQ(d.mode_weights, LinearQuantMode::kSymmetric);
  // Distiller's later per-tensor-kind mode.
  auto m = ptq_options("mode: {activations: ASYMMETRIC_UNSIGNED, weights: SYMMETRIC}\n");
  EXPECT_EQ(m.mode_activations, LinearQuantMode::kAsymmetricUnsigned);
  EXPECT_EQ(m.mode_weights, LinearQuantMode::kSymmetric);
  EXPECT_EQ(m.mode_label(), "a:ASYMMETRIC_UNSIGNED w:SYMMETRIC");
  EXPECT_EQ(d.clip_acts, ClipMode::kNone);
  EXPECT_EQ(ptq_error("clip_acts: MAX\n"),
            "ptq.yaml:2: quantizers.q.clip_acts 'MAX' is not a clip mode; valid: NONE, AVG, N_STD");
  EXPECT_EQ(ptq_error("clip_acts: N_STD\n"),
            "ptq.yaml:2: quantizers.q.clip_acts N_STD needs clip_n_stds (the number of standard "
            "deviations)");
  EXPECT_NE(ptq_error("fp16: True\n").find("fp16 is not supported"), std::string::npos);
  EXPECT_NE(ptq_error("bits_weights: 8\n").find("bits_weights"), std::string::npos);
  EXPECT_NE(ptq_error("overrides:\n  conv: {mode: SYMMETRIC}\n").find("mode"), std::string::npos);
  EXPECT_NE(ptq_error("mode: {activations: SYMMETRIC}\n").find("weights"), std::string::npos);
}

const std::vector<int64_t> kPtqOnes = {1, 1}, kPtqZeros = {0, 0};

// A grouped conv alone: forward = conv(x).
struct PtqGroupedConvImpl : torch::nn::Module {
  PtqGroupedConvImpl() {
    conv = register_module(
        "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 6, 3).groups(2).bias(true)));
  }
  torch::Tensor forward(const torch::Tensor& x) { return conv(x); }
  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(PtqGroupedConv);

// Bias correction (Nagel et al., "Data-Free Quantization", 2019, section 4.2, with the input
// means measured on the calibration data): the bias gains (W − Wq)·E[x] per output channel.
TEST(PostTrainQuantization, BiasCorrectionCancelsTheMeanShiftOfWeightRounding) {
  torch::manual_seed(11);
  // Channel means 1, -2, 0.5, 3: a mean the rounding error of 4-bit weights shifts visibly.
  const auto offsets = torch::tensor({1.0f, -2.0f, 0.5f, 3.0f}).reshape({1, 4, 1, 1});
  const auto x = torch::randn({8, 4, 9, 9}) * 0.5 + offsets;
  auto run = [&](bool correct, PtqGroupedConv& net, at::Tensor* w_float, at::Tensor* b_float) {
    *w_float = net->conv->weight.detach().clone();
    *b_float = net->conv->bias.detach().clone();
    PostTrainLinearQuantizer q(
        ptq_options(std::string("bits_activations: null\nbits_parameters: 4\n") +
                    (correct ? "bias_correction: True\n" : "")),
        *net, {1, 4, 9, 9}, [net](const auto& t) mutable { return net->forward(t); });
    auto stats = q.calibrate([&](const auto& f) { f(x); });
    EXPECT_EQ(stats.layers.at("conv").inputs.at(0).channel_mean.size(), 4u);
    q.prepare(stats, "calibration", nullptr);
    return stats;
  };
  PtqGroupedConv plain, corrected;
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < plain->parameters().size(); ++i)
      corrected->parameters()[i].copy_(plain->parameters()[i]);
  }
  at::Tensor w, b, w2, b2;
  run(false, plain, &w, &b);
  const auto stats = run(true, corrected, &w2, &b2);
  // The same quantized weights; the bias moved by conv(mean image, W − Wq), computed by LibTorch.
  EXPECT_TRUE(torch::equal(plain->conv->weight, corrected->conv->weight));
  EXPECT_TRUE(torch::equal(plain->conv->bias, b));
  const auto mean_image = x.mean({0, 2, 3}, /*keepdim=*/true).expand({1, 4, 3, 3});
  const auto shift = torch::conv2d(mean_image, w - corrected->conv->weight, at::Tensor(), kPtqOnes,
                                   kPtqZeros, kPtqOnes, 2)
                         .reshape({6});
  EXPECT_TRUE(torch::allclose(corrected->conv->bias - b, shift, 1e-5, 1e-5))
      << corrected->conv->bias - b << shift;
  EXPECT_GT(shift.abs().max().item<double>(), 1e-3);  // the case is not trivial
  // The mean output error per channel falls by an order of magnitude.
  torch::NoGradGuard no_grad;
  const auto y = torch::conv2d(x, w, b, kPtqOnes, kPtqZeros, kPtqOnes, 2);
  const auto err_plain = (plain->forward(x) - y).mean({0, 2, 3}).abs().max().item<double>();
  const auto err_corr = (corrected->forward(x) - y).mean({0, 2, 3}).abs().max().item<double>();
  EXPECT_LT(err_corr * 10, err_plain) << err_corr << " " << err_plain;

  // The channel means round-trip through the stats file; a file without them is refused.
  test::TempDir tmp;
  write_quant_stats(stats, tmp.path() / "s.yaml");
  const auto read = read_quant_stats(tmp.path() / "s.yaml");
  EXPECT_EQ(read.layers.at("conv").inputs.at(0).channel_mean,
            stats.layers.at("conv").inputs.at(0).channel_mean);
  QuantStats old = read;
  old.layers.at("conv").inputs.at(0).channel_mean.clear();
  PtqGroupedConv third;
  PostTrainLinearQuantizer q3(ptq_options("bits_parameters: 4\nbias_correction: True\n"), *third,
                              {1, 4, 9, 9},
                              [third](const auto& t) mutable { return third->forward(t); });
  try {
    q3.prepare(old, "stats file s.yaml", nullptr);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "stats file s.yaml has no channel_mean of the input of layer conv, which "
              "bias_correction needs (calibrate again without --qe-stats-file, or set "
              "bias_correction: False)");
  }
}

}  // namespace igb::compress
