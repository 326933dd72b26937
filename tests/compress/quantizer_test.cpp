// The quantizer registry (Distiller's classes recognised and refused), the quantizers' options as
// Distiller's YAML writes them, and the per-module bits their overrides resolve to.
#include "compress/quantizer.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <yaml-cpp/yaml.h>

#include "compress/scheduler.h"
#include "compress/yaml_reader.h"
#include "core/activation.h"
#include "core/error.h"

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

// Only what bits_for needs; the interface's algorithm hooks do nothing here.
class FixedQuantizer : public Quantizer {
 public:
  using Quantizer::Quantizer;
  std::map<std::string, QuantBits> targets() const override { return {}; }
  void prepare_model(torch::nn::Module&) override {}
  void quantize_params() override {}
  void save_state(torch::serialize::OutputArchive&) const override {}
  void load_state(torch::serialize::InputArchive&) override {}
};

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

TEST(Quantizers, RegistryNamesDistillersClassesAsNotAvailable) {
  register_builtin_quantizers();
  EXPECT_EQ(quantizer_registry().names(),
            (std::vector<std::string>{"DorefaQuantizer", "PACTQuantizer",
                                      "QuantAwareTrainRangeLinearQuantizer", "WRPNQuantizer"}));
  for (const auto& n : quantizer_registry().names()) {
    EXPECT_FALSE(quantizer_registry().get(n).make) << n;
    EXPECT_NE(quantizer_registry().entry(n).help.find("not available in this build"),
              std::string::npos)
        << n;
  }
}

TEST(Quantizers, SchedulesNamingOneAreRefusedAndUnknownClassesListTheValidOnes) {
  EXPECT_EQ(schedule_error("  q:\n    class: PACTQuantizer\n    bits_activations: 4\n"),
            "q.yaml:3: quantizer q (PACTQuantizer): quantization-aware training is not available "
            "in this build");
  EXPECT_EQ(
      schedule_error("  q:\n    class: LinearQuantizer\n"),
      "q.yaml:3: unknown quantizer class 'LinearQuantizer'; valid: DorefaQuantizer, PACTQuantizer, "
      "QuantAwareTrainRangeLinearQuantizer, WRPNQuantizer");
  // A refused class's keys are still checked first, with file:line.
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
  FixedQuantizer q("q", o);
  EXPECT_EQ(q.bits_for("conv1").weights, 0);
  EXPECT_EQ(q.bits_for("layer1.0.conv2").weights, 2);  // the earlier pattern wins
  EXPECT_EQ(q.bits_for("layer1.0.conv2").activations, 4);
  EXPECT_EQ(q.bits_for("layer2.conv1").weights, 8);  // whole-name match: "conv1" does not match it
  EXPECT_EQ(q.bits_for("fc").bias, 32);
  o.overrides = {{"layer1[", {4, 4, 4}, "q.yaml:7"}};
  FixedQuantizer bad("bad", o);
  EXPECT_THROW(bad.bits_for("fc"), InputError);
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

}  // namespace igb::compress
