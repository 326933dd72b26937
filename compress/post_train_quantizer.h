#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <nlohmann/json.hpp>

#include <cfloat>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compress/quantizer.h"

namespace igb {
class Logger;
}

/// Post-training quantization as Distiller's PostTrainLinearQuantizer does it (range_linear.py):
/// activation statistics collected on calibration batches (QuantCalibrationStatsCollector's
/// records), then a simulated-quantized model evaluated in float: weights (per output channel
/// when per_channel_wts) and biases quantized in place, activations fake-quantized with the
/// ranges their statistics give. See docs/schedules.md ("Post-training quantization") for what is
/// quantized and where it differs from Distiller.
namespace igb::compress {

class YamlReader;

/// LinearQuantMode (compress/quant_modules.h) is Distiller's; post-training activations use the
/// full signed range [−2^(bits−1), 2^(bits−1) − 1] in SYMMETRIC mode, as Distiller's
/// RangeLinearQuantWrapper does.
/// Distiller's ClipMode: the range of an activation from its statistics.
enum class ClipMode {
  /// min / max over all calibration values.
  kNone,
  /// avg_min / avg_max (the per-sample minima and maxima averaged).
  kAvg,
  /// min / max narrowed to mean ± clip_n_stds·std.
  kNStd,
};

std::string mode_name(LinearQuantMode mode);
std::string clip_name(ClipMode clip);

/// The statistics of one tensor (a layer's input or output) over the calibration batches, as
/// Distiller's QuantCalibrationStatsCollector records them: min and max over all values, avg_min
/// and avg_max the mean over samples of each sample's minimum and maximum (over the batch when a
/// sample holds one value), mean over all values, and from a second pass with that mean, std (the
/// population standard deviation) and b (the mean absolute deviation, the Laplace b); shape of the
/// first batch as "(N, C, H, W)".
struct QuantStatsRecord {
  double min = DBL_MAX;
  double max = -DBL_MAX;
  double avg_min = 0, avg_max = 0, mean = 0, std = 0, b = 0;
  std::string shape;
  /// Values seen (both passes count the same values).
  int64_t total_numel = 0;
  /// Samples behind avg_min / avg_max.
  int64_t samples = 0;
  /// Pass-2 sums of (x − mean)² and |x − mean|, and the values counted in pass 2.
  double sq_sum = 0, abs_sum = 0;
  int64_t pass2_numel = 0;
  /// Mean of each channel (dimension 1) over the batch and every other dimension, from pass 1;
  /// written as `channel_mean` (not in Distiller's files). Bias correction reads it.
  std::vector<double> channel_mean;
  /// Values behind each channel mean.
  int64_t channel_numel = 0;

  /// Adds one batch (dimension 0 is the batch). Pass 1: min, max, avg_min, avg_max, mean;
  /// pass 2: std and b around the mean of pass 1.
  void update(const at::Tensor& t, int pass);
};

/// The statistics of one layer: its inputs by index and its output.
struct LayerQuantStats {
  std::map<int64_t, QuantStatsRecord> inputs;
  std::optional<QuantStatsRecord> output;
};

/// A stats file's content: layers in model order.
struct QuantStats {
  std::vector<std::string> order;
  std::map<std::string, LayerQuantStats> layers;
  LayerQuantStats& at(const std::string& layer);
  const LayerQuantStats* find(const std::string& layer) const;
};

/// Writes `stats` as Distiller's stats YAML (`layer: {inputs: {0: {min, max, avg_min, avg_max,
/// mean, std, b, shape, total_numel}}, output: {...}}`), atomically.
void write_quant_stats(const QuantStats& stats, const std::filesystem::path& file);
/// Reads a stats YAML; InputError with file:line for a malformed entry (min, max, avg_min,
/// avg_max and mean are required; b defaults to 0, a missing std is NaN, which N_STD clipping
/// refuses).
QuantStats read_quant_stats(const std::filesystem::path& file);

/// One activation's quantization: the grid step S (Distiller's scale is 1/S), the ONNX zero point
/// z and the integer range of a 2^bits grid; y = (clamp(round(x/S) + z, 0, 2^bits − 1) − z)·S.
/// SYMMETRIC: z = 2^(bits−1) (the signed range [−2^(bits−1), 2^(bits−1) − 1] with zero 0);
/// asymmetric modes: z = −round(min·/S) (the signed variant shifts q and its zero point alike, so
/// the dequantized values are the unsigned ones).
struct ActQuant {
  double scale = 1;
  int64_t zero_point = 0;
  int64_t bits = 0;
  bool enabled() const { return bits > 0; }
  at::Tensor apply(const at::Tensor& x) const;
};

/// Distiller's _get_quant_params_from_stats_dict: the range from the record (avg_ keys for AVG;
/// N_STD: min/max narrowed to mean ± n_stds·std); SYMMETRIC: sat = max(|lo|, |hi|), scale =
/// (2^(bits−1) − 1)/sat; asymmetric: [min(lo, 0), max(hi, 0)] onto 2^bits − 1 steps with zero
/// point round(scale·lo); a zero range gives scale 1. Scales in float32 as Distiller's tensors.
ActQuant act_quant_from_stats(const QuantStatsRecord& r, int64_t bits, LinearQuantMode mode,
                              ClipMode clip, double n_stds);

/// Quantizes a weight as RangeLinearQuantParamLayerWrapper does, in float: SYMMETRIC per output
/// channel (per_channel, 2-D and 4-D weights) or per tensor, Wq = round(W/S)·S with
/// S = amax/(2^(bits−1) − 1) (compress/fake_quant.h); asymmetric modes: S = range/(2^bits − 1)
/// over [min(W, 0), max(W, 0)], q = clamp(round(W/S) + z, 0, 2^bits − 1), Wq = (q − z)·S. Returns
/// Wq; `scale` receives S (shape [C_out] or [1]).
at::Tensor quantize_weight_ptq(const at::Tensor& w, int64_t bits, LinearQuantMode mode,
                               bool per_channel, at::Tensor* scale);
/// The bias on the accumulator grid S_acc = S_in·S_w (per channel when S_w is):
/// clamp(round(b/S_acc), −2^(bits−1), 2^(bits−1) − 1)·S_acc.
at::Tensor quantize_bias_ptq(const at::Tensor& b, double input_scale, const at::Tensor& w_scale,
                             int64_t accum_bits);

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

/// Post-training quantization of one model: finds its layers on the summary graph, collects
/// statistics or takes them from a file, and turns the model, in place, into its simulated-
/// quantized form. Batch norms following a conv are folded into it first (Distiller's
/// fold_batch_norms_inference); the statistics are those of the float model.
///
///   PostTrainLinearQuantizer q(options, model, input_shape, forward);
///   auto stats = q.calibrate([&](const auto& f) { for (batch in first N) f(batch); });
///   q.prepare(stats, "calibration", &logger);
///   y = q.forward(x);  // quantized input → model → quantized output
class PostTrainLinearQuantizer {
 public:
  using Forward = std::function<at::Tensor(const at::Tensor&)>;
  /// Traces `model` (eval mode) to find its conv/linear layers, their batch norms and the
  /// activation slots; InputError when the model holds quantization already.
  PostTrainLinearQuantizer(PostTrainOptions options, torch::nn::Module& model,
                           std::vector<int64_t> input_shape, Forward forward);
  ~PostTrainLinearQuantizer();

  const PostTrainOptions& options() const { return options_; }
  /// Runs `run_batches` twice (Distiller's two collection passes) with a forward that records the
  /// statistics of the model input, the model output and every activation slot's input and output.
  QuantStats calibrate(const std::function<void(const Forward&)>& run_batches);
  /// The layers `prepare` needs statistics of, with "inputs.0" or "output".
  std::vector<std::string> required_stats() const;
  /// Folds batch norms, quantizes weights and biases, and installs the activation quantization;
  /// once. `source` names where the stats came from (for errors: a stats file lacking a layer).
  void prepare(const QuantStats& stats, const std::string& source, Logger* logger);
  /// The simulated-quantized forward: model input quantized as its first layer's input, model
  /// output as its last layer's output (identity where those stay float).
  at::Tensor forward(const at::Tensor& x) const;
  /// What was quantized, per layer (for test_summary.json).
  nlohmann::json layers_json() const;

 private:
  struct Impl;
  PostTrainOptions options_;
  std::unique_ptr<Impl> impl_;
};

/// What igb-test --quantize-eval asks for.
struct QuantizeEvalRequest {
  /// The post-training YAML (empty: no post-training quantization).
  std::string schedule;
  /// Calibration batches of the evaluation data.
  int64_t calibration_batches = 8;
  /// Stats to load instead of calibrating (empty: calibrate).
  std::string stats_file;
  bool enabled() const { return !schedule.empty(); }
};

/// igb-test --quantize-eval up to the quantized model: reads the YAML, builds the quantizer on
/// `model`, takes the statistics from request.stats_file (else the YAML's model_activation_stats)
/// or calibrates with `run_batches(forward, n)` (which must run forward on the first n batches of
/// the evaluation data) and writes them to `out_dir`/quant_stats.yaml, then prepares the model in
/// place. `info` receives the JSON for test_summary.json (schedule, quantizer, statistics, layers).
std::unique_ptr<PostTrainLinearQuantizer> quantize_for_eval(
    const QuantizeEvalRequest& request, torch::nn::Module& model,
    const std::vector<int64_t>& input_shape, const PostTrainLinearQuantizer::Forward& forward,
    const std::function<void(const PostTrainLinearQuantizer::Forward&, int64_t)>& run_batches,
    const std::filesystem::path& out_dir, Logger& logger, nlohmann::json* info);

}  // namespace igb::compress
