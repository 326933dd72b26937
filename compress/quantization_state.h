#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "compress/quant_modules.h"

namespace igb::compress {

/// The name of a model's input quantizer, as Distiller's (state-dict keys
/// `inputs_quant.tracked_min`, `inputs_quant.scale`, ...).
inline constexpr char kInputsQuantName[] = "inputs_quant";

/// Puts a symmetric FakeLinearQuant of `bits` (≥ 2) and `ema_decay` in front of `model` (the
/// FakeLinearQuantization Distiller's QuantAwareTrainRangeLinearQuantizer puts there when
/// `quantize_inputs` is true), as its InputStage named kInputsQuantName, or
/// adopts the one it holds already with these options (a model rebuilt from a checkpoint), and
/// returns it. InputError naming `who` when `model` has no input slot (it is not a model of the
/// zoo) or holds an input quantizer with other options.
///
///   quantize_model_input(*model, 8, 0.999, "quantizer q");  // forward: inputs_quant, then layers
FakeLinearQuant quantize_model_input(torch::nn::Module& model, int64_t bits, double ema_decay,
                                     const std::string& who);

/// The fake quantization of `model`'s input (its InputStage, when that is a FakeLinearQuant);
/// empty (null) when the model input is not quantized.
FakeLinearQuant model_input_quant(const torch::nn::Module& model);

/// Prepares a freshly built model the way the quantizer recorded in a checkpoint prepared it
/// (CheckpointMeta::quantization: {"class", "bits": {module: {bits_activations, bits_weights,
/// bits_bias}}, hyperparams}), so the checkpoint's tensors can then be loaded into it by name:
/// every module with weight (bias) bits gets its float master copy, scale and bits buffers
/// (QuantizedParam::prepare: DoReFa for DorefaQuantizer and PACTQuantizer, symmetric, per channel
/// when `per_channel_wts`, for QuantAwareTrainRangeLinearQuantizer), and every ReLU activation
/// slot with activation bits its quantizing module (DorefaActQuant, PactActQuant with
/// `act_clip_init_val`, FakeQuantRelu with `ema_decay`), and for
/// QuantAwareTrainRangeLinearQuantizer with `quantize_inputs` true and `num_bits_inputs` not null
/// the model input its quantizer (quantize_model_input). Activation bits of other modules are
/// ignored, as Distiller replaces ReLUs only. Null does nothing.
///
///   auto model = create_model(meta.model, meta.model_options);
///   restore_quantization(*model, meta.quantization);
///   checkpoint.load_model(*model);  // Wq, float_weight, weight_scale, clip_val, EMA buffers
///
/// InputError for an unknown class, a module the model does not have, weight or bias bits on a
/// module that cannot hold them, or a hyperparameter of the wrong type, naming it.
void restore_quantization(torch::nn::Module& model, const nlohmann::json& quantization);

}  // namespace igb::compress
