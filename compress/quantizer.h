#pragma once

#include <torch/nn/module.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compress/model_params.h"
#include "core/registry.h"

namespace igb::compress {

class YamlReader;

/// Bit widths of one layer (Distiller's bits_activations, bits_weights, bits_bias); 0 keeps that
/// tensor in floating point (Distiller's None).
struct QuantBits {
  /// Bits of the layer's output activations. Default 0 (floating point).
  int64_t activations = 0;
  /// Bits of the layer's weights. Default 0 (floating point).
  int64_t weights = 0;
  /// Bits of the layer's bias. Default 0 (floating point).
  int64_t bias = 0;
};

/// The arguments every Distiller quantizer takes: default bit widths and per-layer overrides.
struct QuantizerOptions {
  /// Bits of every layer no override matches.
  QuantBits bits;
  /// Per-layer bit widths: a regular expression matched against whole module names
  /// ("layer1\\..*\\.conv1") and the bits of the layers it matches; the first match wins, as in
  /// Distiller's ordered `overrides`. Default none.
  std::vector<std::pair<std::string, QuantBits>> overrides;
};

/// A quantization-aware-training quantizer (Distiller's Quantizer): it decides per layer what to
/// quantize and to how many bits, replaces the layers of the model with quantizing wrappers
/// (activations through their swappable slot, core/activation.h), re-quantizes the weights from
/// their floating-point copies after each optimizer step, and keeps its learned state (ranges,
/// clipping values) in the checkpoint.
///
/// No quantizer is implemented in this build: the registry names the Distiller classes a schedule
/// may use, and the scheduler refuses them.
class Quantizer {
 public:
  Quantizer(std::string name, QuantizerOptions options)
      : name_(std::move(name)), options_(std::move(options)) {}
  virtual ~Quantizer() = default;
  /// The instance name in the schedule.
  const std::string& name() const { return name_; }
  const QuantizerOptions& options() const { return options_; }
  /// The bits of `module`: those of the first override whose pattern matches the whole name, else
  /// the defaults. InputError when a pattern is not a valid regular expression.
  QuantBits bits_for(const std::string& module) const;

  /// The layers it quantizes (module names) with their resolved bits.
  virtual std::map<std::string, QuantBits> targets() const = 0;
  /// Replaces the layers it quantizes with quantizing wrappers; called once before training, and
  /// on a model rebuilt from a checkpoint before its state is loaded.
  virtual void prepare_model(torch::nn::Module& model) = 0;
  /// Re-quantizes the weights from their floating-point copies (after an optimizer step).
  virtual void quantize_params() = 0;
  virtual void save_state(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;

 private:
  std::string name_;
  QuantizerOptions options_;
};

/// Builds a quantizer of one class from its YAML mapping (keys checked by the reader).
using QuantizerFactory = std::function<std::unique_ptr<Quantizer>(
    const std::string& name, YamlReader& yaml, const ModelParams& params)>;

/// A quantizer class a schedule may name.
struct QuantizerSpec {
  /// Builds it; empty for a class that is recognised but that this build cannot run (naming one
  /// in a schedule is an error saying so).
  QuantizerFactory make;
};

/// Quantizer classes by Distiller name.
Registry<QuantizerSpec>& quantizer_registry();
/// Registers Distiller's quantization-aware-training classes (DorefaQuantizer, PACTQuantizer,
/// WRPNQuantizer, QuantAwareTrainRangeLinearQuantizer), recognised but not available; idempotent.
void register_builtin_quantizers();

}  // namespace igb::compress
