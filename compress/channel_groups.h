#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
/// (build_channel_groups in compress/thinning.h). Filter pruning zeroes whole groups through it,
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
  void set_channels(const std::string& weight, std::vector<size_t> group_of_channel, std::string op) {
    by_weight_[weight] = std::move(group_of_channel);
    op_of_weight_[weight] = std::move(op);
  }

 private:
  std::vector<std::vector<GroupMember>> groups_;
  std::vector<bool> removable_;
  std::map<std::string, std::vector<size_t>> by_weight_;
  std::map<std::string, std::string> op_of_weight_;
};

}  // namespace igb::compress
