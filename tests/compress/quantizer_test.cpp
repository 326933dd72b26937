// The quantizer registry: Distiller's classes are recognised and refused; overrides resolve per
// layer.
#include "compress/quantizer.h"

#include <gtest/gtest.h>

#include "compress/scheduler.h"
#include "core/error.h"

namespace igb::compress {

namespace {

std::string schedule_error(const std::string& quantizers) {
  torch::nn::Linear model(4, 2);
  try {
    CompressionScheduler::from_text("version: 1\nquantizers:\n" + quantizers + "policies: []\n",
                                    "q.yaml", *model, 0.1, nullptr);
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
}

TEST(Quantizers, OverridesResolveByFirstWholeMatch) {
  QuantizerOptions o;
  o.bits = {8, 8, 32};
  o.overrides = {
      {"conv1", {0, 0, 0}}, {"layer1\\..*", {4, 2, 32}}, {"layer1\\.0\\.conv2", {6, 6, 6}}};
  FixedQuantizer q("q", o);
  EXPECT_EQ(q.bits_for("conv1").weights, 0);
  EXPECT_EQ(q.bits_for("layer1.0.conv2").weights, 2);  // the earlier pattern wins
  EXPECT_EQ(q.bits_for("layer1.0.conv2").activations, 4);
  EXPECT_EQ(q.bits_for("layer2.conv1").weights, 8);  // whole-name match: "conv1" does not match it
  EXPECT_EQ(q.bits_for("fc").bias, 32);
  o.overrides = {{"layer1[", {4, 4, 4}}};
  FixedQuantizer bad("bad", o);
  EXPECT_THROW(bad.bits_for("fc"), InputError);
}

}  // namespace igb::compress
