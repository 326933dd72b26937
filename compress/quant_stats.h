#pragma once

#include <ATen/core/Tensor.h>

#include <cfloat>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

/// The activation statistics post-training quantization reads (compress/post_train_quantizer.h)
/// and Distiller's stats YAML that holds them.
namespace igb::compress {

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

}  // namespace igb::compress
