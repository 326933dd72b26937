#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "compress/ptq_arithmetic.h"
#include "compress/quantizer.h"

namespace igb {
class YamlReader;
}  // namespace igb

/// The options of post-training quantization (compress/post_train_quantizer.h): a schedule's
/// PostTrainLinearQuantizer read from YAML, and the settings they give each layer.
namespace igb::compress {

/// Settings of one layer after overrides.
struct PtqLayerSettings {
  QuantBits bits;
  ClipMode clip = ClipMode::kNone;
  double clip_n_stds = 0;
  bool per_channel_wts = false;
};

/// PostTrainLinearQuantizer's keys: bits_activations (8), bits_parameters (8), bits_accum (32),
/// mode (SYMMETRIC, ASYMMETRIC_UNSIGNED, ASYMMETRIC_SIGNED; SYMMETRIC_RESTRICTED read as
/// SYMMETRIC; or {activations: …, weights: …}), per_channel_wts (false), clip_acts
/// (NONE, AVG, N_STD) with clip_n_stds (> 0, required by N_STD), model_activation_stats (a stats
/// file path, optional), overrides (ordered, Distiller's matching: exact name, else the first
/// whole-name pattern; per entry bits_activations, bits_weights, clip_acts, clip_n_stds,
/// per_channel_wts; null bits keep that tensor float). Accepted with a warning: fp16: false,
/// scale_approx_mult_bits: null, bits_bias in an override (Distiller's PTQ puts biases on the
/// accumulator grid whatever it says). Other keys are InputErrors.
struct PostTrainOptions {
  /// bits.activations, bits.weights (bits_parameters), bits.bias (bits_accum) and overrides.
  QuantizerOptions quant;
  /// `mode` of the activations and of the weights: one name for both, or Distiller's
  /// {activations: …, weights: …}.
  LinearQuantMode mode_activations = LinearQuantMode::kSymmetric;
  LinearQuantMode mode_weights = LinearQuantMode::kSymmetric;
  bool per_channel_wts = false;
  ClipMode clip_acts = ClipMode::kNone;
  std::optional<double> clip_n_stds;
  /// `bias_correction` (not in Distiller, default false): after a layer's weights are
  /// quantized, its bias gains (W − Wq)·E[x], the output shift the rounding of the weights causes
  /// on average, from the per-channel means of the layer's input over the calibration data.
  bool bias_correction = false;
  /// model_activation_stats (empty: none).
  std::string stats_file;
  /// Per override entry (parallel to quant.overrides): clip_acts, clip_n_stds, per_channel_wts.
  struct Extra {
    std::optional<ClipMode> clip;
    std::optional<double> n_stds;
    std::optional<bool> per_channel;
  };
  std::vector<Extra> extras;
  /// "file:line: …" warnings about keys read.
  std::vector<std::string> warnings;
  /// The schedule file.
  std::string file;

  static PostTrainOptions from_yaml(YamlReader& yaml);
  /// Reads the one PostTrainLinearQuantizer of `quantizers:` in a schedule file.
  static PostTrainOptions load(const std::string& file);
  nlohmann::json hyperparams() const;
  /// "SYMMETRIC", or "a:ASYMMETRIC_UNSIGNED w:SYMMETRIC" when they differ.
  std::string mode_label() const;
  /// The settings of `module` (overrides resolved).
  PtqLayerSettings settings_for(const std::string& module) const;
};

}  // namespace igb::compress
