#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/serialize/archive.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compress/model_params.h"
#include "compress/quant_modules.h"
#include "compress/training_hooks.h"
#include "core/registry.h"

namespace igb {
class ActivationImpl;
class Logger;
}  // namespace igb

namespace igb {
class YamlReader;
}  // namespace igb

namespace igb::compress {

/// Bit widths of one layer (Distiller's QBits: bits_activations, bits_weights, bits_bias); kFloat
/// keeps that tensor in floating point (Distiller's None, `null` in a schedule).
struct QuantBits {
  static constexpr int64_t kFloat = 0;
  /// Bits of the layer's output activations. Default kFloat.
  int64_t activations = kFloat;
  /// Bits of the layer's weights. Default kFloat.
  int64_t weights = kFloat;
  /// Bits of the layer's bias. Default kFloat.
  int64_t bias = kFloat;
  bool operator==(const QuantBits& o) const {
    return activations == o.activations && weights == o.weights && bias == o.bias;
  }
  bool operator!=(const QuantBits& o) const { return !(*this == o); }
};

/// One entry of a quantizer's `overrides`: a regular expression matched against whole module
/// names and the bits of the modules it matches.
struct QuantOverride {
  std::string pattern;
  QuantBits bits;
  /// file:line of the entry (empty when built in code).
  std::string where;
};

/// The arguments every Distiller quantizer takes: default bit widths and per-layer overrides.
///
/// Read from a schedule as Distiller's YAML writes them: `bits_activations`, `bits_weights`,
/// `bits_bias` (a number of bits, or `null` for floating point; an absent key takes the class's
/// default, 32 for most) and `overrides`, an ordered mapping from module-name patterns to
/// {bits_activations, bits_weights, bits_bias} (a key missing there takes the quantizer's value).
/// Distiller's older keys are read with a warning: `quantize_bias: True` (bits_bias = bits_weights,
/// per override entry too; `False`: the bias stays float) and `bits_overrides` with `acts`, `wts`,
/// `bias`.
struct QuantizerOptions {
  /// Bits of every module no override matches.
  QuantBits bits;
  /// Per-module bit widths in file order (Distiller's ordered `overrides`): a key equal to the
  /// module name wins, else the first pattern matching the whole name, else `bits`.
  std::vector<QuantOverride> overrides;
  /// Warnings about the keys read (legacy keys), each "file:line: …", for the scheduler's log.
  std::vector<std::string> warnings;

  /// Reads the keys above from `yaml` with `defaults` for absent top-level keys (does not finish
  /// the reader). InputError with file:line on a bad value or an unknown key in an override.
  static QuantizerOptions from_yaml(YamlReader& yaml, const QuantBits& defaults);
  /// bits_activations, bits_weights, bits_bias (null for float) and overrides as a list of
  /// {pattern: {bits…}} in order.
  nlohmann::json hyperparams() const;
  /// The bits of `module` (a name as named_modules() writes it): the override whose key equals the
  /// name, else the first whose pattern matches the whole name, else `bits`. Weight and bias bits
  /// are not yet restricted to weight layers (see resolve_quant_bits). InputError (at the entry's
  /// file:line) when a pattern is not a valid regular expression.
  QuantBits bits_for(const std::string& module) const;
  /// --int8-weights 7: every weight grid of `from` to 8 bits (the default's and each override's)
  /// becomes a `to`-bit one (1 ≤ to < from); other widths are kept. Returns whether any changed.
  bool narrow_weights(int64_t from, int64_t to);
};

/// DorefaQuantizer's keys: the common ones, defaults 32/32/null (clipped_linear.py).
struct DorefaOptions : QuantizerOptions {
  static DorefaOptions from_yaml(YamlReader& yaml);
  nlohmann::json hyperparams() const;
};

/// PACTQuantizer's keys: the common ones (defaults 32/32/null) plus `act_clip_init_val`, the
/// initial clipping value α of every replaced ReLU (> 0, default 8.0), and `act_clip_decay`, the
/// weight decay of the α parameter group (>= 0; absent or null: the optimizer's).
struct PactOptions : QuantizerOptions {
  double act_clip_init_val = 8.0;
  std::optional<double> act_clip_decay;
  static PactOptions from_yaml(YamlReader& yaml);
  nlohmann::json hyperparams() const;
};

/// QuantAwareTrainRangeLinearQuantizer's keys: the common ones (defaults 32/32/32) plus `mode`
/// (SYMMETRIC, or its synonym SYMMETRIC_RESTRICTED, alone or as {activations:, weights:}; the
/// asymmetric modes are refused: TensorRT's Q/DQ is symmetric), `ema_decay` of the activation
/// ranges (in [0, 1), default 0.999), `per_channel_wts` (default false), `quantize_inputs` (default
/// true) and `num_bits_inputs` (absent or null: bits_activations).
struct QatRangeOptions : QuantizerOptions {
  double ema_decay = 0.999;
  bool per_channel_wts = false;
  bool quantize_inputs = true;
  int64_t num_bits_inputs = 32;
  static QatRangeOptions from_yaml(YamlReader& yaml);
  nlohmann::json hyperparams() const;
};

/// The bits of every module of `model` (named_modules(), the root as ""), as Distiller's
/// Quantizer.__init__/_add_qbits_entry resolve them: options.bits_for(name), with weight and bias
/// bits kept only on Conv2d, Conv3d, Linear and Embedding modules. InputError at the entry's
/// file:line for an override matching no module (naming the closest module names); a warning
/// appended to `warnings` for one matching only modules it cannot change (neither a weight layer
/// nor a ReLU activation slot).
std::map<std::string, QuantBits> resolve_quant_bits(const QuantizerOptions& options,
                                                    const torch::nn::Module& model,
                                                    std::vector<std::string>* warnings);

/// Reads and checks the keys of a quantizer of class `cls` (Dorefa, PACT or
/// QuantAwareTrainRangeLinear) against `model` and returns its hyperparams() with the class name
/// and the resolved bits; warnings are appended to `warnings`. InputError for any problem; the
/// reader is not finished. Used to report a schedule's errors even for a class this build refuses.
nlohmann::json read_quantizer_options(const std::string& cls, YamlReader& yaml,
                                      const torch::nn::Module& model,
                                      std::vector<std::string>* warnings);

/// A quantization-aware-training quantizer (Distiller's Quantizer with train_with_fp_copy): it
/// decides per module what to quantize and to how many bits, quantizes weights (and biases) in
/// place through float master copies (QuantizedParam, compress/quant_modules.h), replaces ReLU
/// activations through their slot (core/activation.h), re-quantizes the weights after each
/// optimizer step, and keeps its learned state (ranges, clipping values) in the model.
///
///   auto q = quantizer_registry().get("PACTQuantizer").make("q", yaml, params);
///   q->prepare_model(model, &logger);   // once, before the optimizer is built
///   // each minibatch: backward → q->before_step() → optimizer.step() → q->after_step()
class Quantizer {
 public:
  Quantizer(std::string name, QuantizerOptions options)
      : name_(std::move(name)), options_(std::move(options)) {}
  virtual ~Quantizer() = default;
  /// The instance name in the schedule.
  const std::string& name() const { return name_; }
  const QuantizerOptions& options() const { return options_; }
  /// The bits of `module` (QuantizerOptions::bits_for).
  QuantBits bits_for(const std::string& module) const { return options_.bits_for(module); }
  /// The Distiller class name.
  virtual std::string class_name() const = 0;
  /// The class and its resolved options, as a schedule mapping.
  virtual nlohmann::json hyperparams() const = 0;

  /// The modules it changes, with their bits (weights and bias of weight layers, activations of
  /// ReLU slots); filled by prepare_model.
  const std::map<std::string, QuantBits>& targets() const { return targets_; }
  /// Quantizes the weights in place and replaces the ReLU activations; called once, before the
  /// optimizer is built. Adopts a model prepared already (rebuilt from a checkpoint): InputError
  /// when its bits or modules differ. Logs what is quantized and what stays float.
  void prepare_model(torch::nn::Module& model, Logger* logger);
  /// Before the optimizer step: each quantized parameter's gradient is carried through the
  /// quantization function to its float master, which the parameter then holds.
  void before_step();
  /// After the optimizer step (and masks): the masters take the stepped values and the parameters
  /// are quantized again.
  void after_step();
  /// Parameters stepped in a group of their own (PACT's α).
  virtual std::vector<ParamGroup> param_groups() const { return {}; }
  /// Scalars logged per epoch (PACT's α, the QAT activation ranges).
  virtual std::vector<EpochScalar> epoch_scalars() const { return {}; }
  /// Warnings about the options read (legacy keys, overrides that change nothing).
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// The bits its 8-bit weight grids were narrowed to when it was built (WeightNarrowing), or 0.
  int64_t narrowed_weight_bits() const { return narrowed_weight_bits_; }
  void set_narrowed_weight_bits(int64_t bits) { narrowed_weight_bits_ = bits; }
  void add_warnings(const std::vector<std::string>& w) {
    warnings_.insert(warnings_.end(), w.begin(), w.end());
  }
  /// The learned state is in the model; the archive records hyperparams() and the bits, checked
  /// on load (InputError when they differ).
  void save_state(torch::serialize::OutputArchive& archive) const;
  void load_state(torch::serialize::InputArchive& archive);
  /// The resolved bits of the changed modules as JSON ({module: {bits_…}}).
  nlohmann::json bits_json() const;

 protected:
  /// How weights are fake-quantized, and whether per output channel.
  virtual ParamQuantMethod method() const = 0;
  virtual bool per_channel() const { return false; }
  /// The module replacing the ReLU slot `name` for `bits` activation bits.
  virtual torch::nn::AnyModule make_activation(const std::string& name, int64_t bits) = 0;
  /// Whether `module` (the slot's current replacement) is one make_activation builds for `bits`.
  virtual bool adopts_activation(const torch::nn::Module& module, int64_t bits) const = 0;
  /// Quantizes what the class changes besides weight layers and ReLU slots (the model input of
  /// QuantAwareTrainRangeLinearQuantizer), adopting a model prepared already; called by
  /// prepare_model after those. Returns what it quantized, for the log.
  virtual std::vector<std::string> prepare_more(torch::nn::Module&) { return {}; }
  /// The smallest weight and activation bits the class supports.
  virtual int64_t min_weight_bits() const { return 1; }
  virtual int64_t min_activation_bits() const { return 1; }
  /// The replaced slots' modules, by module name (of the Activation).
  std::map<std::string, std::shared_ptr<torch::nn::Module>> activations_;
  std::vector<std::string> warnings_;

 private:
  int64_t narrowed_weight_bits_ = 0;
  std::string name_;
  QuantizerOptions options_;
  // The steps of prepare_model for module `name`; each appends what it quantized to `done`.
  void prepare_params(const std::string& name, torch::nn::Module& module, const QuantBits& bits,
                      std::vector<std::string>& done);
  void prepare_activation(const std::string& name, ActivationImpl& act, int64_t bits,
                          std::vector<std::string>& done);
  void log_prepared(Logger& logger, const std::vector<std::string>& quantized,
                    const std::vector<std::string>& float_acts,
                    const std::vector<std::string>& float_weights) const;

  std::map<std::string, QuantBits> targets_;
  std::vector<QuantizedParam> params_;
};

/// --int8-weights as a quantizer applies it when it is built (options/inference_runtime.h
/// resolves the flag): with `bits` 7, weights whose integers fit 7 bits (|q| ≤ 63, whose pairs
/// against an unsigned input on [0, 255] fit 16 bits): a symmetric range-linear grid of 8 bits
/// becomes one of 7 (±63), a DoReFa grid of 7 or 8 bits one of 6 (odd integers within ±63; 8-bit
/// DoReFa weights are not on an int8 grid at all); 0 keeps them. With
/// `unsigned_activations_only`, only a class whose activations are unsigned narrows (DoReFa,
/// PACT: grids up to 2^bits − 1).
struct WeightNarrowing {
  int64_t bits = 0;
  bool unsigned_activations_only = false;
};

/// Builds a quantizer of one class from its YAML mapping (keys checked by the reader), its
/// overrides resolved against params.model(), its 8-bit weights narrowed as `narrowing` says.
using QuantizerFactory = std::function<std::unique_ptr<Quantizer>(
    const std::string& name, YamlReader& yaml, const ModelParams& params,
    const WeightNarrowing& narrowing)>;

/// The factories (compress/dorefa_quantizer.cpp, compress/qat_range_quantizer.cpp).
std::unique_ptr<Quantizer> make_dorefa_quantizer(const std::string& name, YamlReader& yaml,
                                                 const ModelParams& params,
                                                 const WeightNarrowing& narrowing);
std::unique_ptr<Quantizer> make_pact_quantizer(const std::string& name, YamlReader& yaml,
                                               const ModelParams& params,
                                               const WeightNarrowing& narrowing);
std::unique_ptr<Quantizer> make_qat_range_quantizer(const std::string& name, YamlReader& yaml,
                                                    const ModelParams& params,
                                                    const WeightNarrowing& narrowing);

/// A quantizer class a schedule may name.
struct QuantizerSpec {
  /// Builds it; empty for a class that is recognised but that this build cannot run (naming one
  /// in a schedule is an error saying so).
  QuantizerFactory make;
};

/// Quantizer classes by Distiller name.
Registry<QuantizerSpec>& quantizer_registry();
/// Registers Distiller's quantization-aware-training classes (DorefaQuantizer, PACTQuantizer,
/// QuantAwareTrainRangeLinearQuantizer; WRPNQuantizer recognised but not available); idempotent.
void register_builtin_quantizers();

}  // namespace igb::compress
