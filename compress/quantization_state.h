#pragma once

#include <torch/nn/module.h>

#include <nlohmann/json.hpp>

namespace igb::compress {

/// Prepares a freshly built model the way the quantizer recorded in a checkpoint prepared it
/// (CheckpointMeta::quantization: {"class", "bits": {module: {bits_activations, bits_weights,
/// bits_bias}}, hyperparams}), so the checkpoint's tensors can then be loaded into it by name:
/// every module with weight (bias) bits gets its float master copy, scale and bits buffers
/// (QuantizedParam::prepare: DoReFa for DorefaQuantizer and PACTQuantizer, symmetric, per channel
/// when `per_channel_wts`, for QuantAwareTrainRangeLinearQuantizer), and every ReLU activation
/// slot with activation bits its quantizing module (DorefaActQuant, PactActQuant with
/// `act_clip_init_val`, FakeQuantRelu with `ema_decay`). Activation bits of other modules are
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
