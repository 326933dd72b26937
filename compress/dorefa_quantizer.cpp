// DorefaQuantizer and PACTQuantizer (Distiller's quantization/clipped_linear.py): DoReFa weights
// through float master copies; ReLUs replaced by DoReFa's clamp(0, 1) grid, or by PACT's learned
// clipping value α stepped in an optimizer group of its own.
#include "compress/fake_quant.h"
#include "compress/quantizer.h"
#include "core/yaml_reader.h"

namespace igb::compress {

namespace {

class DorefaQuantizer : public Quantizer {
 public:
  DorefaQuantizer(std::string name, DorefaOptions options)
      : Quantizer(std::move(name), options), options_(std::move(options)) {}
  std::string class_name() const override { return "DorefaQuantizer"; }
  nlohmann::json hyperparams() const override {
    auto j = options_.hyperparams();
    j["class"] = class_name();
    return j;
  }

 protected:
  ParamQuantMethod method() const override { return ParamQuantMethod::kDorefa; }
  torch::nn::AnyModule make_activation(const std::string&, int64_t bits) override {
    return torch::nn::AnyModule(DorefaActQuant(bits));
  }
  bool adopts_activation(const torch::nn::Module& m, int64_t bits) const override {
    const auto* a = dynamic_cast<const DorefaActQuantImpl*>(&m);
    return a && a->options().bits() == bits;
  }

 private:
  DorefaOptions options_;
};

class PactQuantizer : public Quantizer {
 public:
  PactQuantizer(std::string name, PactOptions options)
      : Quantizer(std::move(name), options), options_(std::move(options)) {}
  std::string class_name() const override { return "PACTQuantizer"; }
  nlohmann::json hyperparams() const override {
    auto j = options_.hyperparams();
    j["class"] = class_name();
    return j;
  }
  // PACTQuantizer._get_new_optimizer_params_groups: every clip_val in one group, weight decay
  // act_clip_decay when set.
  std::vector<ParamGroup> param_groups() const override {
    ParamGroup g;
    for (const auto& [name, m] : activations_)
      g.params.push_back(static_cast<const PactActQuantImpl&>(*m).clip_val);
    if (g.params.empty()) return {};
    g.weight_decay = options_.act_clip_decay;
    return {g};
  }
  std::vector<EpochScalar> epoch_scalars() const override {
    std::vector<EpochScalar> out;
    for (const auto& [name, m] : activations_)
      out.push_back({"alpha/" + name, "quantization/alpha/" + name,
                     static_cast<const PactActQuantImpl&>(*m).clip_val.item<double>()});
    return out;
  }

 protected:
  ParamQuantMethod method() const override { return ParamQuantMethod::kDorefa; }
  torch::nn::AnyModule make_activation(const std::string&, int64_t bits) override {
    return torch::nn::AnyModule(
        PactActQuant(PactActQuantOptions(bits).init_alpha(options_.act_clip_init_val)));
  }
  bool adopts_activation(const torch::nn::Module& m, int64_t bits) const override {
    const auto* a = dynamic_cast<const PactActQuantImpl*>(&m);
    return a && a->options().bits() == bits;
  }

 private:
  PactOptions options_;
};

std::vector<std::string> warnings_of(const QuantizerOptions& o, const ModelParams& params) {
  std::vector<std::string> w = o.warnings;
  resolve_quant_bits(o, params.model(), &w);
  return w;
}

}  // namespace

std::unique_ptr<Quantizer> make_dorefa_quantizer(const std::string& name, YamlReader& yaml,
                                                 const ModelParams& params,
                                                 const WeightNarrowing& narrowing) {
  auto o = DorefaOptions::from_yaml(yaml);
  const bool narrowed = narrowing.bits > 0 && o.narrow_weights(narrowing.bits, narrowing.bits - 1);
  auto w = warnings_of(o, params);
  auto q = std::make_unique<DorefaQuantizer>(name, std::move(o));
  q->add_warnings(w);
  if (narrowed) q->set_narrowed_weight_bits(narrowing.bits - 1);
  return q;
}

std::unique_ptr<Quantizer> make_pact_quantizer(const std::string& name, YamlReader& yaml,
                                               const ModelParams& params,
                                               const WeightNarrowing& narrowing) {
  auto o = PactOptions::from_yaml(yaml);
  const bool narrowed = narrowing.bits > 0 && o.narrow_weights(narrowing.bits, narrowing.bits - 1);
  auto w = warnings_of(o, params);
  auto q = std::make_unique<PactQuantizer>(name, std::move(o));
  q->add_warnings(w);
  if (narrowed) q->set_narrowed_weight_bits(narrowing.bits - 1);
  return q;
}

}  // namespace igb::compress
