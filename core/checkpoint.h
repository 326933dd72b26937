#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace igb {

/// Everything a checkpoint says about itself, besides tensors. Stored as JSON inside the archive.
struct CheckpointMeta {
  /// Application option set ("sr", "classify", "deblur").
  std::string optform;
  /// Model registry name and the options it was built with (as the model emits them).
  std::string model;
  nlohmann::json model_options = nlohmann::json::object();
  /// Thinning recipes applied after construction, in order.
  nlohmann::json thinning_recipes = nlohmann::json::array();
  /// The resolved options of the run that wrote it.
  nlohmann::json config = nlohmann::json::object();
  /// Last completed epoch, 0-based; -1 before the first.
  int64_t epoch = -1;
  /// Best validation metric so far, its name and the epoch it was reached.
  std::string best_metric_name;
  double best_metric = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch = -1;
  /// Text of the compression schedule (empty when none).
  std::string schedule_text;
  /// Free-form data of the solver (metrics of the last epoch, ...).
  nlohmann::json extra = nlohmann::json::object();

  nlohmann::json to_json() const;
  static CheckpointMeta from_json(const nlohmann::json& j);
};

/// What a checkpoint holds besides its meta; any pointer may be null.
struct CheckpointParts {
  const torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  /// Writes the compression scheduler's state (masks, policy state, ...).
  std::function<void(torch::serialize::OutputArchive&)> scheduler;
};

/// Saves a checkpoint atomically (temporary file, then rename), including the CPU RNG state.
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const CheckpointParts& parts);

/// A checkpoint read back from disk. Loading validates the archive; a missing, corrupt, truncated
/// or foreign file is an InputError naming the file.
class Checkpoint {
 public:
  static Checkpoint load(const std::filesystem::path& path);

  const CheckpointMeta& meta() const { return meta_; }
  const std::filesystem::path& path() const { return path_; }

  /// Copies the saved parameters and buffers into `model`. Every name must exist on both sides
  /// with the same shape; a mismatch is an InputError naming the tensor and both shapes.
  void load_model(torch::nn::Module& model) const;
  /// Restores optimizer state; returns false when the checkpoint has none.
  bool load_optimizer(torch::optim::Optimizer& optimizer) const;
  /// Opens the scheduler section; returns false when there is none.
  bool scheduler_archive(torch::serialize::InputArchive& out) const;
  /// Restores the CPU generator state saved with the checkpoint.
  void restore_rng() const;

 private:
  std::filesystem::path path_;
  CheckpointMeta meta_;
  std::shared_ptr<torch::serialize::InputArchive> archive_;
};

/// Flattens a module's parameters and buffers (dotted names) in registration order.
std::vector<std::pair<std::string, torch::Tensor>> named_state(const torch::nn::Module& model);

}  // namespace igb
