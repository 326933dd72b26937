// QuantAwareTrainRangeLinearQuantizer (Distiller's quantization/range_linear.py), SYMMETRIC mode:
// weights through float master copies on the restricted symmetric grid (per tensor or per output
// channel), ReLU outputs fake-quantized with ranges tracked by bias-corrected moving averages, and
// with quantize_inputs the model input as well (Distiller's `inputs_quant`).
#include "compress/fake_quant.h"
#include "compress/quantization_state.h"
#include "compress/quantizer.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

class QatRangeQuantizer : public Quantizer {
 public:
  QatRangeQuantizer(std::string name, QatRangeOptions options)
      : Quantizer(std::move(name), options), options_(std::move(options)) {}
  std::string class_name() const override { return "QuantAwareTrainRangeLinearQuantizer"; }
  nlohmann::json hyperparams() const override {
    auto j = options_.hyperparams();
    j["class"] = class_name();
    return j;
  }
  std::vector<EpochScalar> epoch_scalars() const override {
    std::vector<EpochScalar> out;
    for (const auto& [name, m] : activations_)
      out.push_back({"act_amax/" + name, "quantization/act_amax/" + name,
                     static_cast<const FakeQuantReluImpl&>(*m).range()});
    if (inputs_quant_)
      out.push_back({std::string("act_amax/") + kInputsQuantName,
                     std::string("quantization/act_amax/") + kInputsQuantName,
                     inputs_quant_->range()});
    return out;
  }

 protected:
  ParamQuantMethod method() const override { return ParamQuantMethod::kSymmetric; }
  bool per_channel() const override { return options_.per_channel_wts; }
  int64_t min_weight_bits() const override { return 2; }
  int64_t min_activation_bits() const override { return 2; }
  torch::nn::AnyModule make_activation(const std::string&, int64_t bits) override {
    return torch::nn::AnyModule(
        FakeQuantRelu(FakeQuantReluOptions(bits).ema_decay(options_.ema_decay)));
  }
  // range_linear.py: with quantize_inputs the model's forward first passes its input through
  // FakeLinearQuantization(num_bits_inputs, mode, ema_decay), `inputs_quant`.
  std::vector<std::string> prepare_more(torch::nn::Module& model) override {
    inputs_quant_ = nullptr;
    const int64_t bits = options_.num_bits_inputs;
    if (!options_.quantize_inputs || bits == QuantBits::kFloat) return {};
    inputs_quant_ = quantize_model_input(model, bits, options_.ema_decay,
                                         "quantizer " + name() + " (" + class_name() + ")");
    return {std::string(kInputsQuantName) + " (the model input) " + std::to_string(bits) + " bits"};
  }
  bool adopts_activation(const torch::nn::Module& m, int64_t bits) const override {
    const auto* a = dynamic_cast<const FakeQuantReluImpl*>(&m);
    return a && a->options().bits() == bits && a->options().ema_decay() == options_.ema_decay;
  }

 private:
  QatRangeOptions options_;
  FakeLinearQuant inputs_quant_{nullptr};
};

}  // namespace

std::unique_ptr<Quantizer> make_qat_range_quantizer(const std::string& name, YamlReader& yaml,
                                                    const ModelParams& params,
                                                    const WeightNarrowing& narrowing) {
  auto o = QatRangeOptions::from_yaml(yaml);
  // Symmetric activations: a ReLU's output tops at 2^(bits−1) − 1, where 8-bit pairs fit.
  const bool narrowed = narrowing.bits > 0 && !narrowing.unsigned_activations_only &&
                        o.narrow_weights(8, narrowing.bits);
  std::vector<std::string> w = o.warnings;
  resolve_quant_bits(o, params.model(), &w);
  auto q = std::make_unique<QatRangeQuantizer>(name, std::move(o));
  q->add_warnings(w);
  if (narrowed) q->set_narrowed_weight_bits(narrowing.bits);
  return q;
}

}  // namespace igb::compress
