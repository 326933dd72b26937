#include "compress/quantization_state.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <map>
#include <string>

#include "compress/quant_modules.h"
#include "core/activation.h"
#include "core/error.h"
#include "core/input_stage.h"

namespace igb::compress {

namespace {

using json = nlohmann::json;

// The bits under `key` of one module's entry; 0 (floating point) for null.
int64_t entry_bits(const json& entry, const char* key, const std::string& module) {
  const std::string at = "quantization.bits." + module + "." + key;
  auto it = entry.find(key);
  if (it == entry.end() || it->is_null()) return 0;
  if (!it->is_number_integer() || it->get<int64_t>() < 1)
    throw InputError("'" + at + "' must be a number of bits or null, not " + it->dump());
  return it->get<int64_t>();
}

double number_or(const json& q, const char* key, double fallback) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  if (!it->is_number())
    throw InputError("'quantization." + std::string(key) + "' must be a number, not " +
                     it->type_name());
  return it->get<double>();
}

bool bool_or(const json& q, const char* key, bool fallback) {
  auto it = q.find(key);
  if (it == q.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw InputError("'quantization." + std::string(key) + "' must be true or false, not " +
                     it->type_name());
  return it->get<bool>();
}

// range_linear.py's mode: a string, or {activations:, weights:}. Only the symmetric grids are
// restored here (the one TensorRT runs); anything else is refused rather than rebuilt wrongly.
void check_symmetric_mode(const json& q) {
  auto it = q.find("mode");
  if (it == q.end() || it->is_null()) return;
  auto symmetric = [](const json& v) {
    return v.is_null() || (v.is_string() && (v.get<std::string>() == "SYMMETRIC" ||
                                             v.get<std::string>() == "SYMMETRIC_RESTRICTED"));
  };
  bool ok = symmetric(*it);
  if (it->is_object()) {
    ok = true;
    for (const auto& kv : it->items())
      ok = ok && (kv.key() == "activations" || kv.key() == "weights") && symmetric(kv.value());
  }
  if (!ok)
    throw InputError("'quantization.mode' is " + it->dump() +
                     ", which this build cannot restore (valid: SYMMETRIC, SYMMETRIC_RESTRICTED)");
}

// quantizer.py:_add_qbits_entry keeps weight and bias bits only on these module types.
bool holds_quantized_weights(torch::nn::Module& m) {
  return m.as<torch::nn::Conv2dImpl>() || m.as<torch::nn::Conv3dImpl>() ||
         m.as<torch::nn::LinearImpl>() || m.as<torch::nn::EmbeddingImpl>();
}

}  // namespace

FakeLinearQuant model_input_quant(const torch::nn::Module& model) {
  const auto* slot = dynamic_cast<const InputStage*>(&model);
  if (!slot) return FakeLinearQuant(nullptr);
  return FakeLinearQuant(std::dynamic_pointer_cast<FakeLinearQuantImpl>(slot->input_stage()));
}

FakeLinearQuant quantize_model_input(torch::nn::Module& model, int64_t bits, double ema_decay,
                                     const std::string& who) {
  auto* slot = dynamic_cast<InputStage*>(&model);
  if (!slot)
    throw InputError(who +
                     ": quantize_inputs needs a model of the zoo (its input slot); set "
                     "quantize_inputs: false");
  if (bits < 2)
    throw InputError(who + ": the model input gets " + std::to_string(bits) +
                     " bits; the symmetric grid needs at least 2");
  if (auto stage = slot->input_stage()) {
    auto current_impl = std::dynamic_pointer_cast<FakeLinearQuantImpl>(stage);
    if (!current_impl)
      throw InputError(who + ": the model input passes through another stage already");
    FakeLinearQuant current(current_impl);
    const auto& o = current->options();
    if (o.bits() != bits || o.ema_decay() != ema_decay || o.mode() != LinearQuantMode::kSymmetric)
      throw InputError(who + ": the model input is quantized already with " +
                       std::to_string(o.bits()) + " bits and ema_decay " +
                       std::to_string(o.ema_decay()) + ", not " + std::to_string(bits) +
                       " bits and ema_decay " + std::to_string(ema_decay));
    return current;
  }
  FakeLinearQuant q(FakeLinearQuantOptions(bits).ema_decay(ema_decay));
  slot->set_input_stage(kInputsQuantName, q.ptr(),
                        [impl = q.ptr()](const at::Tensor& x) { return impl->forward(x); });
  return q;
}

void restore_quantization(torch::nn::Module& model, const nlohmann::json& quantization) {
  const json& q = quantization;
  if (q.is_null()) return;
  if (!q.is_object()) throw InputError("'quantization' must be an object or null");
  const auto cls_it = q.find("class");
  if (cls_it == q.end() || !cls_it->is_string())
    throw InputError("'quantization.class' must name the quantizer class");
  const std::string cls = cls_it->get<std::string>();
  const std::vector<std::string> classes = {"DorefaQuantizer", "PACTQuantizer",
                                            "QuantAwareTrainRangeLinearQuantizer"};
  if (std::find(classes.begin(), classes.end(), cls) == classes.end())
    throw InputError("quantizer class '" + cls +
                     "' cannot be restored; valid classes: " + join(classes));
  const bool range_linear = cls == "QuantAwareTrainRangeLinearQuantizer";
  if (range_linear) check_symmetric_mode(q);
  const ParamQuantMethod method =
      range_linear ? ParamQuantMethod::kSymmetric : ParamQuantMethod::kDorefa;
  const bool per_channel = range_linear && bool_or(q, "per_channel_wts", false);
  const double init_alpha = number_or(q, "act_clip_init_val", 8.0);
  const double ema_decay = number_or(q, "ema_decay", 0.999);

  // Distiller's quantize_inputs (default true) with num_bits_inputs (null: the input stays float).
  if (range_linear && bool_or(q, "quantize_inputs", true)) {
    auto it = q.find("num_bits_inputs");
    if (it != q.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 1)
        throw InputError("'quantization.num_bits_inputs' must be a number of bits or null, not " +
                         it->dump());
      quantize_model_input(model, it->get<int64_t>(), ema_decay, "quantization.num_bits_inputs");
    }
  }

  const auto bits_it = q.find("bits");
  if (bits_it == q.end() || !bits_it->is_object())
    throw InputError("'quantization.bits' must be an object of module names");
  std::map<std::string, std::shared_ptr<torch::nn::Module>> modules;
  for (const auto& item : model.named_modules()) modules[item.key()] = item.value();
  for (const auto& entry : bits_it->items()) {
    const std::string& name = entry.key();
    auto it = modules.find(name);
    if (it == modules.end())
      throw InputError("quantization names module '" + name + "', which the model does not have");
    if (!entry.value().is_object())
      throw InputError("'quantization.bits." + name + "' must be an object");
    torch::nn::Module& m = *it->second;
    const std::string shown = name.empty() ? "the model" : "module '" + name + "'";
    for (const char* param : {"weight", "bias"}) {
      const int64_t bits =
          entry_bits(entry.value(), param[0] == 'w' ? "bits_weights" : "bits_bias", name);
      if (bits == 0) continue;
      if (!holds_quantized_weights(m))
        throw InputError("quantization gives " + shown + " " + param +
                         " bits, but it is not a Conv2d, Conv3d, Linear or Embedding layer");
      // The bias is 1-D: always one scale (range_linear.py quantizes it per tensor).
      QuantizedParam::prepare(m, param, bits, method, per_channel && param[0] == 'w');
    }
    const int64_t act_bits = entry_bits(entry.value(), "bits_activations", name);
    auto* act = m.as<ActivationImpl>();
    if (act_bits == 0 || !act || act->options().kind() != ActivationKind::kReLU) continue;
    if (cls == "DorefaQuantizer")
      act->replace(torch::nn::AnyModule(DorefaActQuant(act_bits)));
    else if (cls == "PACTQuantizer")
      act->replace(
          torch::nn::AnyModule(PactActQuant(PactActQuantOptions(act_bits).init_alpha(init_alpha))));
    else
      act->replace(
          torch::nn::AnyModule(FakeQuantRelu(FakeQuantReluOptions(act_bits).ema_decay(ema_decay))));
  }
}

}  // namespace igb::compress
