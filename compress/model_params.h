#pragma once

#include <torch/nn/module.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compress/channel_groups.h"

namespace igb::compress {

/// The parameters of a model as a schedule sees them: names (a leading "module." in a schedule is
/// stripped, as DataParallel adds it) and the channel groups of the model's summary graph.
class ModelParams {
 public:
  explicit ModelParams(torch::nn::Module& model);

  /// Resolves a schedule's parameter name: a name the model does not have is read without its
  /// "module" path segments (DataParallel wrappers, `module.conv1.weight` or
  /// `features.module.3.weight`), and the renaming is recorded (stripped()). InputError at `where`
  /// naming the closest valid names when there is no such parameter.
  std::string resolve(const std::string& name, const std::string& where) const;
  /// The names resolve() read without "module" segments, as (given, resolved), in first-read order.
  const std::vector<std::pair<std::string, std::string>>& stripped() const { return stripped_; }
  bool contains(const std::string& name) const { return params_.count(name) != 0; }
  /// Makes `name` read as `value` in this copy (a ranking of other values than the model's:
  /// bn_fold_ranking.h); the model's parameter is not changed.
  void replace(const std::string& name, const at::Tensor& value) { params_.at(name) = value; }
  at::Tensor& at(const std::string& name) { return params_.at(name); }
  const at::Tensor& at(const std::string& name) const { return params_.at(name); }
  const std::vector<std::string>& names() const { return names_; }
  /// Weights of convolutions and linear layers (dimension ≥ 2), in model order.
  std::vector<std::string> weight_names() const;

  /// Channel groups from the summary graph (set by the scheduler, which traces the model): filter
  /// pruning zeroes whole groups, every filter tied by residual adds and concats and every
  /// per-channel follower (bias, norm affine terms, PReLU slopes).
  void set_channel_groups(std::shared_ptr<const ChannelGroups> groups) {
    groups_ = std::move(groups);
  }
  const ChannelGroups* channel_groups() const { return groups_.get(); }

  /// The model the parameters belong to (pruners that observe its activations reach its modules).
  torch::nn::Module& model() const { return *model_; }

 private:
  torch::nn::Module* model_;
  std::map<std::string, at::Tensor> params_;
  std::vector<std::string> names_;
  mutable std::vector<std::pair<std::string, std::string>> stripped_;
  std::shared_ptr<const ChannelGroups> groups_;
};

}  // namespace igb::compress
