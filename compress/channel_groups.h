#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/summary_graph.h"

namespace igb::compress {

/// One tensor entry tied to a channel group.
struct GroupMember {
  enum class Role {
    kProducer,  // writes the channel: a filter (weight slice) or bias entry
    kFollower,  // a per-channel op on the way: norm affine terms, depthwise filter, PReLU slope
    kConsumer,  // reads the channel: an input-channel slice of a conv, transposed conv or linear
  };
  Role role;
  std::string op;      // the op's name in the summary graph
  std::string tensor;  // parameter name
  int64_t dim = 0;
  int64_t index = 0;
};

/// For every conv, transposed conv and linear weight, the channel group of each of its output
/// channels: every producer filter and per-channel follower tied to it by the summary graph
/// (build_channel_groups below). Filter pruning zeroes whole groups through it,
/// so what it prunes can be thinned, even where residual adds tie several layers together.
class ChannelGroups {
 public:
  /// Whether `weight` is a producer weight of the graph.
  bool has(const std::string& weight) const { return by_weight_.count(weight) > 0; }
  /// Producer and follower entries of output channel `channel` of `weight`'s layer.
  const std::vector<GroupMember>& members(const std::string& weight, int64_t channel) const {
    return groups_.at(by_weight_.at(weight).at(static_cast<size_t>(channel)));
  }
  /// Other layers (op names) whose filters share groups with `weight`'s layer.
  std::vector<std::string> partners(const std::string& weight) const;
  /// Whether channel `channel` of `weight` can be removed by thinning at all.
  bool removable(const std::string& weight, int64_t channel) const {
    return removable_.at(by_weight_.at(weight).at(static_cast<size_t>(channel)));
  }

  /// Filled by build_channel_groups.
  void add_group(std::vector<GroupMember> members, bool removable) {
    groups_.push_back(std::move(members));
    removable_.push_back(removable);
  }
  void set_channels(const std::string& weight, std::vector<size_t> group_of_channel,
                    std::string op) {
    by_weight_[weight] = std::move(group_of_channel);
    op_of_weight_[weight] = std::move(op);
  }

 private:
  std::vector<std::vector<GroupMember>> groups_;
  std::vector<bool> removable_;
  std::map<std::string, std::vector<size_t>> by_weight_;
  std::map<std::string, std::string> op_of_weight_;
};

/// The channels of every tensor in a summary graph, tied into groups by the op table's channel
/// rule (graph::channel_link): an op that keeps channels in place ties input channel c to output
/// channel c; a concat or channel pad ties each input's channels to their offset in the output; a
/// flatten ties a channel to its block of H·W features; a pixel shuffle ties r² input channels to
/// one output channel. Channels that reach the model's input or output, or an op the rule does not
/// follow, are fixed (never removable), with the reason kept for reports.
class ChannelTies {
 public:
  ChannelTies(const torch::nn::Module& model, const graph::SummaryGraph& graph);

  /// Channel count of value `v` (0 for tensors without a channel dimension).
  int64_t channels(int v) const;
  /// Index of channel `c` of value `v` among all channels of the graph.
  int node(int v, int64_t c) const { return base_[static_cast<size_t>(v)] + static_cast<int>(c); }
  /// Number of channels of all values.
  int size() const { return static_cast<int>(fixed_.size()); }
  /// Representative of the group of channel node `n`.
  int find(int n) const;
  int root(int v, int64_t c) const { return find(node(v, c)); }
  bool fixed(int n) const { return fixed_[static_cast<size_t>(n)]; }
  /// Why node `n` is fixed ("the model's output"), "" when it is not.
  const std::string& why_fixed(int n) const { return why_fixed_[static_cast<size_t>(n)]; }

  /// Parameters indexed by the output channels of a per-channel op on the channel path: norm
  /// affine terms, depthwise filters and biases, per-channel PReLU slopes (buffers excluded).
  std::vector<std::string> follower_params(const graph::OpNode& op) const;
  /// Whether `op` is such a per-channel op.
  bool is_follower(const graph::OpNode& op) const { return !follower_params(op).empty(); }
  /// Whether `op` is a depthwise convolution.
  bool is_depthwise(const graph::OpNode& op) const;
  /// Whether `op` is a ChannelPad module (whose padded channel counts thinning can change).
  bool is_channel_pad_module(const graph::OpNode& op) const;

 private:
  void tie(const graph::OpNode& op);
  void unite(int a, int b);
  void fix_value(int v, const std::string& why);
  void fix_node(int n, const std::string& why);
  void fix_op(const graph::OpNode& op);

  const torch::nn::Module& model_;
  const graph::SummaryGraph& g_;
  torch::OrderedDict<std::string, at::Tensor> params_;
  std::vector<int> base_;
  mutable std::vector<int> parent_;
  std::vector<bool> fixed_;
  std::vector<std::string> why_fixed_;
};

/// Every tensor entry tied to output channel `channel` of producer op `op` (a conv, transposed
/// conv or linear): the filters of all producers joined with it by adds and concats, the
/// per-channel followers, and the consumers' input slices. Zeroing the producer and follower
/// entries makes the group removable by filter thinning. Also reports whether the group can be
/// removed at all (`removable` false when it reaches the model's input or output or an op the
/// walk does not follow).
std::vector<GroupMember> channel_group(const torch::nn::Module& model,
                                       const graph::SummaryGraph& graph, const std::string& op,
                                       int64_t channel, bool* removable = nullptr);

/// The channel groups of every producer's output channels, for group-consistent filter pruning.
std::shared_ptr<ChannelGroups> build_channel_groups(const torch::nn::Module& model,
                                                    const graph::SummaryGraph& graph);

}  // namespace igb::compress
