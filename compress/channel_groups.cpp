#include "compress/channel_groups.h"

#include <numeric>
#include <set>

#include "core/error.h"

namespace igb::compress {

using graph::ChannelLink;
using graph::OpNode;
using graph::SummaryGraph;

ChannelTies::ChannelTies(const torch::nn::Module& model, const SummaryGraph& graph)
    : model_(model), g_(graph), params_(model.named_parameters()) {
  int total = 0;
  for (const auto& v : g_.values()) {
    base_.push_back(total);
    total += static_cast<int>(channels(v.id));
  }
  parent_.resize(static_cast<size_t>(total));
  std::iota(parent_.begin(), parent_.end(), 0);
  fixed_.assign(static_cast<size_t>(total), false);
  why_fixed_.assign(static_cast<size_t>(total), "");
  for (const auto& op : g_.ops()) tie(op);
  for (int v : g_.inputs()) fix_value(v, "the model's input");
  for (int v : g_.outputs()) fix_value(v, "the model's output");
}

int64_t ChannelTies::channels(int v) const {
  const auto& s = g_.shape(v);
  return s.size() >= 2 ? s[1] : 0;
}

int ChannelTies::find(int x) const {
  while (parent_[static_cast<size_t>(x)] != x) {
    auto& p = parent_[static_cast<size_t>(x)];
    p = parent_[static_cast<size_t>(p)];
    x = p;
  }
  return x;
}

void ChannelTies::unite(int a, int b) {
  a = find(a), b = find(b);
  if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
}

void ChannelTies::fix_value(int v, const std::string& why) {
  for (int64_t c = 0; c < channels(v); ++c) fix_node(node(v, c), why);
}

void ChannelTies::fix_node(int n, const std::string& why) {
  fixed_[static_cast<size_t>(n)] = true;
  if (why_fixed_[static_cast<size_t>(n)].empty()) why_fixed_[static_cast<size_t>(n)] = why;
}

void ChannelTies::fix_op(const OpNode& op) {
  const std::string why = op.name + " (" + op.type + "), which thinning does not follow";
  for (int v : op.inputs) fix_value(v, why);
  for (int v : op.outputs) fix_value(v, why);
}

bool ChannelTies::is_depthwise(const OpNode& op) const {
  return !op.inputs.empty() && !op.outputs.empty() &&
         graph::is_depthwise(op, g_.shape(op.inputs[0]), g_.shape(op.outputs[0]));
}

bool ChannelTies::is_channel_pad_module(const OpNode& op) const {
  if (op.module.empty()) return false;
  for (const auto& item : model_.named_modules("", false))
    if (item.key() == op.module)
      return item.value()->name().find("ChannelPad") != std::string::npos;
  return false;
}

std::vector<std::string> ChannelTies::follower_params(const OpNode& op) const {
  std::vector<std::string> out;
  if (op.outputs.empty()) return out;
  const int64_t c = channels(op.outputs[0]);
  auto add = [&](const std::string& name) {
    if (name.empty()) return;
    const auto* t = params_.find(name);
    if (t && t->dim() >= 1 && t->size(0) == c && (t->dim() == 1 || is_depthwise(op)))
      out.push_back(name);
  };
  if (is_depthwise(op)) {
    add(op.param("weight"));
    add(op.param("bias"));
  } else if (!graph::is_producer(op)) {
    for (const char* p : graph::op_info(op.op_kind).per_channel) add(op.param(p));
  }
  return out;
}

void ChannelTies::tie(const OpNode& op) {
  using Kind = ChannelLink::Kind;
  if (op.inputs.empty() || op.outputs.empty()) return fix_op(op);
  const int out = op.outputs[0];
  for (int slot = 0; slot < static_cast<int>(op.inputs.size()); ++slot) {
    const int in = op.inputs[static_cast<size_t>(slot)];
    const ChannelLink l = g_.link(op.id, slot);
    switch (l.kind) {
      case Kind::kMixed:
      case Kind::kBroadcast:
        break;
      case Kind::kBarrier:
        return fix_op(op);
      case Kind::kSame:
        if (l.partial ? channels(in) + l.offset > channels(out) : channels(in) != channels(out))
          return fix_op(op);
        for (int64_t c = 0; c < channels(in); ++c) unite(node(in, c), node(out, l.offset + c));
        // Padded channels can only go when a ChannelPad module can be told how many are left.
        if (l.pads_channels && !is_channel_pad_module(op))
          for (int64_t c = 0; c < channels(out); ++c)
            if (c < l.offset || c >= l.offset + channels(in))
              fix_node(node(out, c), op.name + " (a channel pad that is not a ChannelPad module)");
        break;
      case Kind::kBlock:
        for (int64_t c = 0; c < channels(in); ++c)
          for (int64_t k = 0; k < l.block; ++k)
            if (l.offset + c * l.block + k < channels(out))
              unite(node(in, c), node(out, l.offset + c * l.block + k));
        break;
      case Kind::kGroup:
        for (int64_t c = 0; c < channels(out); ++c)
          for (int64_t k = 0; k < l.group; ++k) unite(node(in, c * l.group + k), node(out, c));
        break;
    }
  }
}

namespace {

/// Output- and input-channel dimensions of a producer's weight, from the op table.
int64_t out_dim(const OpNode& op) { return graph::op_info(op.op_kind).weight_out_dim; }
int64_t in_dim(const OpNode& op) { return graph::op_info(op.op_kind).weight_in_dim; }

}  // namespace

std::vector<GroupMember> channel_group(const torch::nn::Module& model, const SummaryGraph& graph,
                                       const std::string& name, int64_t channel, bool* removable) {
  torch::NoGradGuard no_grad;
  ChannelTies ties(model, graph);
  const auto& src = graph.op(graph.index(name));
  if (!graph::is_producer(src) || src.outputs.empty() || channel < 0 ||
      channel >= ties.channels(src.outputs[0]))
    throw InputError("channel_group: " + src.name +
                     " is not a conv, transposed conv or linear layer with output channel " +
                     std::to_string(channel));
  const int r = ties.root(src.outputs[0], channel);
  bool fixed = false;
  for (int i = 0; i < ties.size(); ++i)
    if (ties.fixed(i) && ties.find(i) == r) fixed = true;
  if (removable) *removable = !fixed;
  std::vector<GroupMember> out;
  using Role = GroupMember::Role;
  auto add = [&](Role role, const OpNode& op, const std::string& t, int64_t dim, int64_t index) {
    if (!t.empty()) out.push_back({role, op.name, t, dim, index});
  };
  for (const auto& op : graph.ops()) {
    if (op.inputs.empty() || op.outputs.empty()) continue;
    const int in = op.inputs[0], o = op.outputs[0];
    const bool producer = graph::is_producer(op);
    const auto followers = producer ? std::vector<std::string>{} : ties.follower_params(op);
    for (int64_t c = 0; c < ties.channels(o); ++c) {
      if (ties.root(o, c) != r) continue;
      if (producer) {
        add(Role::kProducer, op, op.param("weight"), out_dim(op), c);
        add(Role::kProducer, op, op.param("bias"), 0, c);
      }
      for (const auto& f : followers) add(Role::kFollower, op, f, 0, c);
    }
    if (producer)
      for (int64_t c = 0; c < ties.channels(in); ++c)
        if (ties.root(in, c) == r) add(Role::kConsumer, op, op.param("weight"), in_dim(op), c);
  }
  return out;
}

std::shared_ptr<ChannelGroups> build_channel_groups(const torch::nn::Module& model,
                                                    const SummaryGraph& graph) {
  torch::NoGradGuard no_grad;
  ChannelTies ties(model, graph);
  std::map<int, std::vector<GroupMember>> by_root;
  std::map<int, bool> fixed;
  for (int i = 0; i < ties.size(); ++i)
    if (ties.fixed(i)) fixed[ties.find(i)] = true;
  using Role = GroupMember::Role;
  for (const auto& op : graph.ops()) {
    if (op.inputs.empty() || op.outputs.empty()) continue;
    const int o = op.outputs[0];
    const bool producer = graph::is_producer(op);
    std::vector<std::pair<std::string, int64_t>> tensors;  // (name, channel dim)
    if (producer) {
      tensors.emplace_back(op.param("weight"), out_dim(op));
      if (!op.param("bias").empty()) tensors.emplace_back(op.param("bias"), 0);
    } else {
      for (const auto& f : ties.follower_params(op)) tensors.emplace_back(f, 0);
    }
    if (tensors.empty()) continue;
    for (int64_t c = 0; c < ties.channels(o); ++c) {
      auto& list = by_root[ties.root(o, c)];
      for (const auto& [t, dim] : tensors)
        list.push_back({producer ? Role::kProducer : Role::kFollower, op.name, t, dim, c});
    }
  }
  auto out = std::make_shared<ChannelGroups>();
  std::map<int, size_t> index;
  for (auto& [r, list] : by_root) {
    index[r] = index.size();
    out->add_group(std::move(list), !fixed[r]);
  }
  for (const auto& op : graph.ops()) {
    if (!graph::is_producer(op) || op.outputs.empty()) continue;
    std::vector<size_t> of_channel;
    for (int64_t c = 0; c < ties.channels(op.outputs[0]); ++c)
      of_channel.push_back(index.at(ties.root(op.outputs[0], c)));
    out->set_channels(op.param("weight"), std::move(of_channel), op.name);
  }
  return out;
}

std::vector<std::string> ChannelGroups::partners(const std::string& weight) const {
  std::set<std::string> out;
  const auto& own = op_of_weight_.at(weight);
  for (size_t g : by_weight_.at(weight))
    for (const auto& m : groups_[g])
      if (m.role == GroupMember::Role::kProducer && m.op != own) out.insert(m.op);
  return {out.begin(), out.end()};
}

}  // namespace igb::compress
