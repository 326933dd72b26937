#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compress/post_train_options.h"
#include "compress/ptq_arithmetic.h"
#include "compress/quant_stats.h"

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
  /// --int8-weights: 7 narrows the schedule's 8-bit weight grids to 7 bits (exact on CPUs
  /// without VNNI with no split input, docs/int8.md); 0 keeps the schedule's bits.
  int64_t weight_bits = 0;
  bool enabled() const { return !schedule.empty(); }
};

/// igb-test --quantize-eval up to the quantized model: reads the YAML, builds the quantizer on
/// `model`, takes the statistics from request.stats_file (else the YAML's model_activation_stats)
/// or calibrates with `run_batches(forward, n)` (which must run forward on the first n batches of
/// the evaluation data) and writes them to `out_dir`/quant_stats.yaml, then prepares the model in
/// place. `info` receives the JSON for test_summary.json (schedule, quantizer, statistics, layers;
/// "int8_weights_narrowed" when request.weight_bits changed a layer's bits).
std::unique_ptr<PostTrainLinearQuantizer> quantize_for_eval(
    const QuantizeEvalRequest& request, torch::nn::Module& model,
    const std::vector<int64_t>& input_shape, const PostTrainLinearQuantizer::Forward& forward,
    const std::function<void(const PostTrainLinearQuantizer::Forward&, int64_t)>& run_batches,
    const std::filesystem::path& out_dir, Logger& logger, nlohmann::json* info);

}  // namespace igb::compress
