#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/archive.h>

#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace igb {

/// " (first line of a LibTorch error)" for a message about a file LibTorch could not read, or
/// nothing when the error is not LibTorch's or speaks of its internals (an assertion, "report a
/// bug") rather than of the file; "[enforce fail at …]" prefixes are dropped.
std::string library_error_detail(const std::exception& e);

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
  /// The quantizer that prepared the model, null when none (and in checkpoints written before
  /// quantization existed): {"class": "PACTQuantizer", "bits": {"layer1.0.conv1":
  /// {"bits_activations": null, "bits_weights": 3, "bits_bias": null}, ...}, and the quantizer's
  /// hyperparams beside them ("act_clip_init_val": 8.0, ...)} (null bits = floating point). A
  /// rebuilt model is prepared from it before its tensors are loaded.
  nlohmann::json quantization = nullptr;

  nlohmann::json to_json() const;
  /// Reads the JSON back, checking every key's type and that values can be right (epoch between
  /// -1 and kMaxCheckpointEpoch, best_epoch not after epoch, thinning recipes and quantization of
  /// the documented shape); anything else is an InputError saying which key and what is wrong.
  static CheckpointMeta from_json(const nlohmann::json& j);
};

/// The largest epoch a checkpoint may record; a larger one is refused as corrupt.
constexpr int64_t kMaxCheckpointEpoch = 1000000;

/// What a checkpoint holds besides its meta; any pointer may be null.
struct CheckpointParts {
  const torch::nn::Module* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;
  /// Writes the compression scheduler's state (masks, policy state, ...).
  std::function<void(torch::serialize::OutputArchive&)> scheduler;
  /// Writes the training task's own state (a GAN's critic and its optimizer).
  std::function<void(torch::serialize::OutputArchive&)> task;
};

/// Saves a checkpoint atomically (temporary file, fsync, rename), including the CPU RNG state.
/// Every record of the archive gets a CRC-32C in the `igb_checksums` record (docs/file-formats.md).
void save_checkpoint(const std::filesystem::path& path, const CheckpointMeta& meta,
                     const CheckpointParts& parts);

/// A checkpoint read back from disk. Loading verifies the CRC-32C of every record before anything
/// is parsed ("checkpoint F is corrupt: record R fails its checksum"), then validates the meta; a
/// missing, corrupt, truncated or foreign file is always one InputError line naming the file.
/// A checkpoint of an older igb (format 1, no checksums) still loads, with one warning line on
/// stderr that it is unverified.
class Checkpoint {
 public:
  static Checkpoint load(const std::filesystem::path& path);

  const CheckpointMeta& meta() const { return meta_; }
  const std::filesystem::path& path() const { return path_; }
  /// False for an older checkpoint without checksums, which was loaded unverified.
  bool verified() const { return verified_; }

  /// Copies the saved parameters and buffers into `model`. Every name must exist on both sides
  /// with the same shape; a mismatch is an InputError naming the tensor and both shapes. A
  /// parameter holding NaN or infinity, or a buffer holding NaN, is refused, naming it.
  void load_model(torch::nn::Module& model) const;
  /// Restores optimizer state; returns false when the checkpoint has none.
  bool load_optimizer(torch::optim::Optimizer& optimizer) const;
  /// Opens the scheduler section; returns false when there is none.
  bool scheduler_archive(torch::serialize::InputArchive& out) const;
  /// Opens the training task's section; returns false when there is none.
  bool task_archive(torch::serialize::InputArchive& out) const;
  /// Restores the CPU generator state saved with the checkpoint.
  void restore_rng() const;

 private:
  std::filesystem::path path_;
  CheckpointMeta meta_;
  bool verified_ = false;
  std::shared_ptr<torch::serialize::InputArchive> archive_;
};

/// Flattens a module's parameters and buffers (dotted names) in registration order.
std::vector<std::pair<std::string, torch::Tensor>> named_state(const torch::nn::Module& model);

}  // namespace igb
