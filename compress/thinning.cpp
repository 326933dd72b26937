#include "compress/thinning.h"

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "core/activation.h"
#include "core/error.h"
#include "core/tensor_util.h"
#include "core/thinning_recipe.h"

namespace igb::compress {

using graph::OpNode;
using graph::SummaryGraph;

namespace {

/// Per-channel counts of non-zero entries of `t` along `dim` (the other dimensions summed).
std::vector<int64_t> nonzero_per(const at::Tensor& t, int64_t dim) {
  auto nz = t.detach().ne(0).to(torch::kLong);
  if (t.dim() > 1) {
    std::vector<int64_t> others;
    for (int64_t d = 0; d < t.dim(); ++d)
      if (d != dim) others.push_back(d);
    nz = nz.sum(others);
  }
  nz = nz.contiguous().cpu();
  return std::vector<int64_t>(nz.data_ptr<int64_t>(), nz.data_ptr<int64_t>() + nz.numel());
}

std::string fmt_count(int64_t before, int64_t after) {
  return std::to_string(before) + " -> " + std::to_string(after);
}

class Planner {
 public:
  Planner(const torch::nn::Module& model, const SummaryGraph& g, ThinningKind kind,
          WidthPolicy width)
      : g_(g),
        kind_(kind),
        width_(std::move(width)),
        params_(model.named_parameters()),
        buffers_(model.named_buffers()),
        ties_(model, g) {
    find_heads(model);
    const auto total = static_cast<size_t>(ties_.size());
    not_zero_preserving_.assign(total, false);
    why_spoiled_.assign(total, "");
    source_.assign(total, false);
    source_nonzero_.assign(total, false);
    consumer_.assign(total, false);
    consumer_nonzero_.assign(total, false);
  }

  ThinningPlan plan() {
    for (const auto& op : g_.ops()) inspect(op);
    for (const auto& h : heads_) inspect_head(h);
    decide();
    if (width_) round_widths();
    return build();
  }

 private:
  int64_t channels(int v) const { return ties_.channels(v); }
  int node(int v, int64_t c) const { return ties_.node(v, c); }
  int root(int v, int64_t c) const { return ties_.root(v, c); }
  const at::Tensor& tensor(const std::string& name) const {
    if (const auto* t = params_.find(name)) return *t;
    return buffers_[name];
  }
  static bool producer(const OpNode& op) { return graph::is_producer(op); }
  static const graph::OpInfo& info(const OpNode& op) { return graph::op_info(op.op_kind); }

  /// An early exit's head (core/activation.h, attach_branch): it reads the channels of its
  /// activation's output through its first layer, a conv (channel c = input channel c) or a
  /// linear layer after channel-keeping pooling and a flatten (channel c = features
  /// [c·block, (c+1)·block)). A head that starts otherwise keeps its channels as they are.
  struct HeadUse {
    std::string point, module, weight;
    int value = -1;
    bool linear = false, supported = false;
    int64_t block = 1;
  };

  void find_heads(const torch::nn::Module& model) {
    for (const auto& item : model.named_modules("", /*include_self=*/false)) {
      auto act = std::dynamic_pointer_cast<ActivationImpl>(item.value());
      if (!act || !act->has_branch()) continue;
      const int op = g_.find(item.key());
      if (op < 0 || g_.op(op).outputs.empty()) continue;
      HeadUse h;
      h.point = item.key();
      h.value = g_.op(op).outputs[0];
      const auto& children = act->branch()->named_children();
      for (const auto& c : children) {
        const auto& m = c.value();
        if (m->as<torch::nn::Conv2d>() || m->as<torch::nn::Linear>()) {
          h.module = item.key() + ".branch_net." + c.key();
          h.weight = h.module + ".weight";
          h.linear = m->as<torch::nn::Linear>() != nullptr;
          const int64_t in = h.linear ? m->as<torch::nn::Linear>()->options.in_features()
                                      : m->as<torch::nn::Conv2d>()->options.in_channels();
          const int64_t c_in = ties_.channels(h.value);
          h.supported = c_in > 0 && in % c_in == 0 && (h.linear || in == c_in);
          h.block = c_in > 0 ? in / c_in : 1;
          break;
        }
        const std::string type = m->name();
        const bool keeps_channels = type.find("Pool") != std::string::npos ||
                                    type.find("Flatten") != std::string::npos ||
                                    std::dynamic_pointer_cast<ActivationImpl>(m) != nullptr;
        if (!keeps_channels) break;
      }
      heads_.push_back(h);
    }
  }

  /// A head is one more consumer of its activation's channels.
  void inspect_head(const HeadUse& h) {
    const int64_t c_in = channels(h.value);
    if (!h.supported) {
      for (int64_t c = 0; c < c_in; ++c) {
        not_zero_preserving_[node(h.value, c)] = true;
        consumer_nonzero_[node(h.value, c)] = true;
        if (why_spoiled_[node(h.value, c)].empty())
          why_spoiled_[node(h.value, c)] = "the early exit's head at " + h.point +
                                           " reads them through a layer thinning "
                                           "does not resize";
      }
      return;
    }
    const auto w = tensor(h.weight).detach();
    const auto per = h.linear ? w.reshape({w.size(0), c_in, h.block}) : w;
    const auto nz = nonzero_per(per, 1);
    for (int64_t c = 0; c < c_in; ++c) {
      consumer_[node(h.value, c)] = true;
      if (nz[static_cast<size_t>(c)]) consumer_nonzero_[node(h.value, c)] = true;
    }
  }

  /// The head's first layer loses the features of the channels removed from its activation.
  void thin_head(ThinningPlan& plan, const HeadUse& h) {
    const auto kin = keep(h.value);
    if (!h.supported || static_cast<int64_t>(kin.size()) == channels(h.value)) return;
    std::vector<int64_t> features;
    for (int64_t c : kin)
      for (int64_t j = 0; j < h.block; ++j) features.push_back(c * h.block + j);
    slice(plan.recipe, h.weight, 1, features);
    set(plan.recipe, h.module, h.linear ? "in_features" : "in_channels",
        static_cast<int64_t>(features.size()));
    plan.log.push_back(h.module +
                       " (early exit): " + (h.linear ? "input features " : "input channels ") +
                       fmt_count(channels(h.value) * h.block, features.size()));
  }

  /// Records which channels each op writes (sources) or reads (consumers), and whether they
  /// stay zero through it.
  void inspect(const OpNode& op) {
    if (op.inputs.empty() || op.outputs.empty()) return;
    const int in = op.inputs[0], out = op.outputs[0];
    const std::string weight = op.param("weight"), bias = op.param("bias");
    if (producer(op)) {
      const auto& w = tensor(weight);
      const int64_t out_dim = info(op).weight_out_dim, in_dim = info(op).weight_in_dim;
      auto out_nz = nonzero_per(w, out_dim);
      if (!bias.empty()) {
        auto b = nonzero_per(tensor(bias), 0);
        for (size_t j = 0; j < out_nz.size(); ++j) out_nz[j] += b[j];
      }
      for (int64_t j = 0; j < channels(out) && j < static_cast<int64_t>(out_nz.size()); ++j) {
        source_[node(out, j)] = true;
        if (out_nz[j]) source_nonzero_[node(out, j)] = true;
      }
      auto in_nz = nonzero_per(w, in_dim);
      for (int64_t c = 0; c < channels(in) && c < static_cast<int64_t>(in_nz.size()); ++c) {
        consumer_[node(in, c)] = true;
        if (in_nz[c]) consumer_nonzero_[node(in, c)] = true;
      }
      return;
    }
    // Ops on the channel path that do not map a zero channel to zero.
    auto spoil = [&](const std::vector<int64_t>& bad) {
      for (int64_t c = 0; c < channels(out) && c < static_cast<int64_t>(bad.size()); ++c)
        if (bad[c]) {
          not_zero_preserving_[node(out, c)] = true;
          if (why_spoiled_[node(out, c)].empty())
            why_spoiled_[node(out, c)] =
                op.name + " (" + op.type + ") turns a zero channel into a non-zero one";
        }
    };
    if (!graph::maps_zero_to_zero(op)) spoil(std::vector<int64_t>(channels(out), 1));
    if (ties_.is_depthwise(op) && !bias.empty()) spoil(nonzero_per(tensor(bias), 0));
    if (op.op_kind == graph::OpKind::kBatchNorm && !bias.empty()) {
      // Eval: beta - gamma·mean/sqrt(var + eps); training: beta. Zero when beta = 0 and gamma·mean
      // = 0.
      auto beta = nonzero_per(tensor(bias), 0);
      std::vector<int64_t> bad = beta;
      if (!weight.empty() && !op.param("running_mean").empty()) {
        auto gm = nonzero_per(tensor(weight).detach() * tensor(op.param("running_mean")), 0);
        for (size_t c = 0; c < bad.size(); ++c) bad[c] += gm[c];
      }
      spoil(bad);
    }
    if (op.op_kind == graph::OpKind::kInstanceNorm && !bias.empty())
      spoil(nonzero_per(tensor(bias), 0));
  }

  /// Chooses the groups to remove.
  void decide() {
    std::map<int, bool> fixed, source, source_nonzero, consumer, consumer_nonzero, spoiled;
    const int n = ties_.size();
    for (int i = 0; i < n; ++i) {
      const int r = ties_.find(i);
      fixed[r] = fixed[r] || ties_.fixed(i);
      source[r] = source[r] || source_[i];
      source_nonzero[r] = source_nonzero[r] || source_nonzero_[i];
      consumer[r] = consumer[r] || consumer_[i];
      consumer_nonzero[r] = consumer_nonzero[r] || consumer_nonzero_[i];
      spoiled[r] = spoiled[r] || not_zero_preserving_[i];
    }
    for (const auto& [r, is_fixed] : fixed) {
      if (is_fixed) continue;
      const bool go = kind_ == ThinningKind::kFilters
                          ? source[r] && !source_nonzero[r] && !spoiled[r]
                          : consumer[r] && !consumer_nonzero[r];
      if (go) removed_.insert(r);
    }
    // Why a group with a zeroed filter stays (reported in the plan's log).
    for (int i = 0; i < n; ++i) {
      const int r = ties_.find(i);
      if (ties_.fixed(i) && !ties_.why_fixed(i).empty() && !why_reach_.count(r))
        why_reach_[r] = "its channels reach " + ties_.why_fixed(i);
      if (not_zero_preserving_[i] && !why_spoil_.count(r)) why_spoil_[r] = why_spoiled_[i];
    }
    // Every tensor keeps at least one channel.
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& v : g_.values()) {
        const int64_t c = channels(v.id);
        if (c == 0) continue;
        bool all = true;
        for (int64_t k = 0; k < c && all; ++k) all = removed_.count(root(v.id, k)) > 0;
        if (all) {
          removed_.erase(root(v.id, 0));
          why_last_[root(v.id, 0)] = "it would leave a tensor with no channel";
          changed = true;
        }
      }
    }
  }

  /// The sets of tensors narrowed alike (the same removable channel groups in the same order),
  /// each with the producers writing and consumers reading it.
  std::vector<ThinnedTensor> tensor_sets() {
    std::map<std::vector<int>, size_t> index;
    std::vector<ThinnedTensor> sets;
    for (const auto& v : g_.values()) {
      const int64_t c = channels(v.id);
      std::vector<int> roots;
      bool narrowed = false;
      for (int64_t k = 0; k < c; ++k) {
        roots.push_back(root(v.id, k));
        narrowed = narrowed || removed_.count(roots.back()) > 0;
      }
      if (!narrowed) continue;
      auto [it, added] = index.emplace(roots, sets.size());
      if (added) {
        sets.emplace_back();
        sets.back().graph = &g_;
        sets.back().dense = c;
        sets.back().kept_of = [this](int value) { return kept_count(value); };
      }
      auto& s = sets[it->second];
      s.values.push_back(v.id);
      if (v.producer >= 0 && producer(g_.op(v.producer))) s.producers.push_back(&g_.op(v.producer));
      for (int op : v.consumers)
        if (producer(g_.op(op)) && g_.op(op).inputs[0] == v.id &&
            std::find(s.consumers.begin(), s.consumers.end(), &g_.op(op)) == s.consumers.end())
          s.consumers.push_back(&g_.op(op));
    }
    return sets;
  }

  /// Keeps removable groups of each tensor set, in channel order, until its width is the one the
  /// policy asks for; asks again until no width changes (a kept group widens every set it spans).
  void round_widths() {
    auto sets = tensor_sets();
    std::map<size_t, int64_t> before;  // set → width before rounding
    for (size_t i = 0; i < sets.size(); ++i) before[i] = kept_count(sets[i].values[0]);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t i = 0; i < sets.size(); ++i) {
        auto& s = sets[i];
        const int v = s.values[0];
        s.kept = kept_count(v);
        if (s.kept == s.dense) continue;
        const int64_t want = std::clamp(width_(s), s.kept, s.dense);
        for (int64_t c = 0; c < s.dense && kept_count(v) < want; ++c)
          if (removed_.erase(root(v, c))) {
            rounded_.insert(root(v, c));
            changed = true;
          }
      }
    }
    for (const auto& [i, width] : before) {
      const auto& s = sets[i];
      const int64_t now = kept_count(s.values[0]);
      if (now == width) continue;
      const int v = s.values[0];
      const std::string name = !s.producers.empty() ? s.producers[0]->name
                               : g_.values()[static_cast<size_t>(v)].producer >= 0
                                   ? g_.op(g_.values()[static_cast<size_t>(v)].producer).name
                                   : s.consumers[0]->name;
      const int64_t extra = now - width;
      rounding_log_.push_back(name + ": " + std::to_string(extra) + " zeroed " +
                              (kind_ == ThinningKind::kFilters ? "filter" : "channel") +
                              (extra > 1 ? "s" : "") + " kept to round " + std::to_string(width) +
                              " channels to " + std::to_string(now));
    }
  }

  int64_t kept_count(int v) {
    int64_t n = 0;
    for (int64_t c = 0; c < channels(v); ++c) n += removed_.count(root(v, c)) ? 0 : 1;
    return n;
  }

  std::vector<int64_t> keep(int v) {
    std::vector<int64_t> k;
    for (int64_t c = 0; c < channels(v); ++c)
      if (!removed_.count(root(v, c))) k.push_back(c);
    return k;
  }

  /// Log lines for zeroed filters that stay, with the reason, so nothing is kept silently.
  void report_kept(ThinningPlan& plan) {
    std::map<int, std::set<std::string>> live;  // group → producers with a live filter in it
    for (const auto& op : g_.ops()) {
      if (!producer(op)) continue;
      const int out = op.outputs[0];
      for (int64_t j = 0; j < channels(out); ++j)
        if (source_nonzero_[node(out, j)]) live[root(out, j)].insert(op.name);
    }
    for (const auto& op : g_.ops()) {
      if (!producer(op)) continue;
      const int out = op.outputs[0];
      std::map<std::string, int64_t> kept;  // reason → count
      for (int64_t j = 0; j < channels(out); ++j) {
        const int n = node(out, j);
        const int r = root(out, j);
        if (source_nonzero_[n] || removed_.count(r) || rounded_.count(r)) continue;
        std::string why = "its channel group cannot be removed";
        if (why_reach_.count(r)) {
          why = why_reach_[r];
        } else if (live.count(r)) {
          auto others = live[r];
          others.erase(op.name);
          why = others.empty() ? "it shares a channel group (a pixel-shuffle group) with live "
                                 "filters of the same layer"
                               : "tied by adds or concats to live filters of " +
                                     join({others.begin(), others.end()});
        } else if (why_spoil_.count(r)) {
          why = why_spoil_[r];
        } else if (why_last_.count(r)) {
          why = why_last_[r];
        }
        ++kept[why];
      }
      for (const auto& [why, count] : kept)
        plan.log.push_back(op.name + ": " + std::to_string(count) + " zeroed filter" +
                           (count > 1 ? "s" : "") + " kept: " + why);
    }
  }

  void slice(nlohmann::json& recipe, const std::string& name, int64_t dim,
             const std::vector<int64_t>& keep) {
    if (name.empty()) return;
    const auto& t = tensor(name);
    if (t.size(dim) == static_cast<int64_t>(keep.size())) return;
    const auto key = name + "#" + std::to_string(dim);
    if (auto it = sliced_.find(key); it != sliced_.end()) {
      if (it->second != keep)
        throw InputError("cannot thin: " + name +
                         " is used by two ops whose channels are removed differently");
      return;
    }
    sliced_[key] = keep;
    recipe["tensors"].push_back(
        {{"name", name}, {"dim", dim}, {"size", t.size(dim)}, {"keep", keep}});
  }

  void set(nlohmann::json& recipe, const std::string& module, const std::string& option,
           int64_t value) {
    if (module.empty()) return;
    for (auto& m : recipe["modules"])
      if (m["name"] == module) {
        m["set"][option] = value;
        return;
      }
    recipe["modules"].push_back({{"name", module}, {"set", {{option, value}}}});
  }

  ThinningPlan build() {
    ThinningPlan plan;
    plan.removed_groups = static_cast<int64_t>(removed_.size());
    plan.rounded_groups = static_cast<int64_t>(rounded_.size());
    plan.log.insert(plan.log.end(), rounding_log_.begin(), rounding_log_.end());
    plan.recipe = {{"kind", kind_ == ThinningKind::kFilters ? "filters" : "channels"},
                   {"tensors", nlohmann::json::array()},
                   {"modules", nlohmann::json::array()}};
    if (kind_ == ThinningKind::kFilters) report_kept(plan);
    if (removed_.empty()) return plan;
    report_joined_groups(plan);
    for (const auto& op : g_.ops()) {
      if (op.inputs.empty() || op.outputs.empty()) continue;
      const int in = op.inputs[0], out = op.outputs[0];
      const auto kin = keep(in), kout = keep(out);
      const bool in_changed = static_cast<int64_t>(kin.size()) != channels(in);
      const bool out_changed = static_cast<int64_t>(kout.size()) != channels(out);
      if (!in_changed && !out_changed) continue;
      if (producer(op))
        thin_producer(plan, op, kin, kout, in_changed, out_changed);
      else if (ties_.is_depthwise(op))
        thin_depthwise(plan, op, kin);
      else if (ties_.is_follower(op) || (!info(op).per_channel.empty() && op.params.empty()))
        thin_per_channel(plan, op, kin);
      else if (ties_.is_channel_pad_module(op))
        thin_channel_pad(plan, op, kout);
    }
    for (const auto& h : heads_) thin_head(plan, h);
    return plan;
  }

  /// Groups written by more than one producer (residual adds): which layers moved together.
  void report_joined_groups(ThinningPlan& plan) {
    std::map<int, std::set<std::string>> producers_of;
    for (const auto& op : g_.ops()) {
      if (!producer(op)) continue;
      const int out = op.outputs[0];
      for (int64_t j = 0; j < channels(out); ++j)
        if (removed_.count(root(out, j))) producers_of[root(out, j)].insert(op.name);
    }
    std::set<std::set<std::string>> groups;
    for (const auto& [r, names] : producers_of)
      if (names.size() > 1) groups.insert(names);
    for (const auto& names : groups) {
      std::vector<std::string> list(names.begin(), names.end());
      plan.log.push_back("channel group of " + std::to_string(list.size()) +
                         " layers joined by adds or concats, "
                         "thinned together: " +
                         join(list));
    }
  }

  /// A convolution's or linear layer's filters (outputs) and input channels (features).
  void thin_producer(ThinningPlan& plan, const OpNode& op, const std::vector<int64_t>& kin,
                     const std::vector<int64_t>& kout, bool in_changed, bool out_changed) {
    const int in = op.inputs[0], out = op.outputs[0];
    const std::string weight = op.param("weight"), bias = op.param("bias");
    const bool linear = op.op_kind == graph::OpKind::kLinear;
    if (out_changed) {
      slice(plan.recipe, weight, info(op).weight_out_dim, kout);
      slice(plan.recipe, bias, 0, kout);
      set(plan.recipe, op.module, info(op).out_option, static_cast<int64_t>(kout.size()));
      plan.log.push_back(op.name + ": " + (linear ? "outputs " : "filters ") +
                         fmt_count(channels(out), kout.size()));
    }
    if (in_changed) {
      slice(plan.recipe, weight, info(op).weight_in_dim, kin);
      set(plan.recipe, op.module, info(op).in_option, static_cast<int64_t>(kin.size()));
      plan.log.push_back(op.name + ": " + (linear ? "input features " : "input channels ") +
                         fmt_count(channels(in), kin.size()));
    }
  }

  /// A depthwise convolution keeps the channels it is given, in and out.
  void thin_depthwise(ThinningPlan& plan, const OpNode& op, const std::vector<int64_t>& kin) {
    slice(plan.recipe, op.param("weight"), 0, kin);
    slice(plan.recipe, op.param("bias"), 0, kin);
    const auto n = static_cast<int64_t>(kin.size());
    set(plan.recipe, op.module, "in_channels", n);
    set(plan.recipe, op.module, "out_channels", n);
    set(plan.recipe, op.module, "groups", n);
    plan.log.push_back(op.name + ": depthwise channels " + fmt_count(channels(op.inputs[0]), n));
  }

  /// Per-channel parameters and buffers (norm statistics) follow their channels.
  void thin_per_channel(ThinningPlan& plan, const OpNode& op, const std::vector<int64_t>& kin) {
    const int in = op.inputs[0];
    for (const char* p : info(op).per_channel) {
      const std::string t = op.param(p);
      if (!t.empty() && tensor(t).dim() >= 1 && tensor(t).size(0) == channels(in))
        slice(plan.recipe, t, 0, kin);
    }
    set(plan.recipe, op.module, info(op).count_option, static_cast<int64_t>(kin.size()));
  }

  /// A channel pad keeps the padded channels that stay, before and after its input's.
  void thin_channel_pad(ThinningPlan& plan, const OpNode& op, const std::vector<int64_t>& kout) {
    const int in = op.inputs[0], out = op.outputs[0];
    const auto rank = static_cast<int64_t>(g_.shape(in).size());
    const int64_t before = op.pads[2 * static_cast<size_t>(rank - 2)];
    int64_t kept_before = 0, kept_after = 0;
    for (int64_t c : kout) {
      if (c < before)
        ++kept_before;
      else if (c >= before + channels(in))
        ++kept_after;
    }
    set(plan.recipe, op.module, "before", kept_before);
    set(plan.recipe, op.module, "after", kept_after);
    plan.log.push_back(op.name + ": padded channels " +
                       fmt_count(channels(out) - channels(in), kept_before + kept_after));
  }

  const SummaryGraph& g_;
  ThinningKind kind_;
  WidthPolicy width_;
  std::set<int> rounded_;
  std::vector<std::string> rounding_log_;
  torch::OrderedDict<std::string, at::Tensor> params_, buffers_;
  ChannelTies ties_;
  std::vector<bool> not_zero_preserving_, source_, source_nonzero_, consumer_, consumer_nonzero_;
  std::vector<std::string> why_spoiled_;
  std::map<int, std::string> why_reach_, why_spoil_, why_last_;
  std::set<int> removed_;
  std::map<std::string, std::vector<int64_t>> sliced_;
  std::vector<HeadUse> heads_;
};

/// Slices every state tensor of `p` in `optimizer` that has `p`'s shape along `dim`.
void slice_optimizer_state(torch::optim::Optimizer& optimizer, const at::Tensor& p, int64_t dim,
                           const std::vector<int64_t>& keep) {
  auto& state = optimizer.state();
  auto it = state.find(c10::guts::to_string(p.unsafeGetTensorImpl()));
  if (it == state.end()) return;
  auto cut = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.sizes() != p.sizes()) return t;
    return t.index_select(dim, index_tensor(keep, t.device())).contiguous();
  };
  torch::NoGradGuard no_grad;
  auto* s = it->second.get();
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(s)) {
    sgd->momentum_buffer(cut(sgd->momentum_buffer()));
  } else if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(s)) {
    adam->exp_avg(cut(adam->exp_avg()));
    adam->exp_avg_sq(cut(adam->exp_avg_sq()));
    adam->max_exp_avg_sq(cut(adam->max_exp_avg_sq()));
  } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(s)) {
    adamw->exp_avg(cut(adamw->exp_avg()));
    adamw->exp_avg_sq(cut(adamw->exp_avg_sq()));
    adamw->max_exp_avg_sq(cut(adamw->max_exp_avg_sq()));
  } else if (auto* rms = dynamic_cast<torch::optim::RMSpropParamState*>(s)) {
    rms->square_avg(cut(rms->square_avg()));
    rms->momentum_buffer(cut(rms->momentum_buffer()));
    rms->grad_avg(cut(rms->grad_avg()));
  } else if (auto* ada = dynamic_cast<torch::optim::AdagradParamState*>(s)) {
    ada->sum(cut(ada->sum()));
  } else {
    throw std::logic_error("thinning cannot slice the state of this optimizer");
  }
}

const char* kQuantizedSuffix = " is quantized; thin before quantizing";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Thinning would slice Wq but not its floating-point copy and scales, and a quantized activation
// slot is not a channel rule the planner knows: refuse, naming the first quantized layer. A
// quantizer marks a layer with a `<module>.weight_bits` buffer and fills an activation slot with a
// module of its own (its class name holds "Quant": DorefaActQuant, PactActQuant, FakeQuantRelu).
void refuse_quantized(const torch::nn::Module& model) {
  for (const auto& b : model.named_buffers())
    if (ends_with(b.key(), ".weight_bits") && b.value().numel() == 1 &&
        b.value().item<int64_t>() > 0)
      throw InputError(b.key().substr(0, b.key().size() - 12) + kQuantizedSuffix);
  for (const auto& m : model.named_modules("", /*include_self=*/false)) {
    if (!dynamic_cast<const ActivationImpl*>(m.value().get())) continue;
    for (const auto& child : m.value()->named_children())
      if (child.key() == "replacement" && child.value()->name().find("Quant") != std::string::npos)
        throw InputError(m.key() + kQuantizedSuffix);
  }
}

void refuse_quantized(const SummaryGraph& graph) {
  for (const auto& op : graph.ops()) {
    if (op.weight_bits <= 0 && op.op_kind != graph::OpKind::kFakeQuantize) continue;
    std::string layer = op.module.empty() ? op.name : op.module;
    if (ends_with(layer, ".replacement")) layer.resize(layer.size() - 12);
    // An op named after the activation it runs in ("layer1.0.relu1.fakequantize"): the activation.
    if (op.module.empty() && layer.find('.') != std::string::npos) layer.resize(layer.rfind('.'));
    throw InputError(layer + kQuantizedSuffix);
  }
}

}  // namespace

WidthPolicy round_to_multiple(int64_t n) {
  if (n < 1)
    throw InputError("channel rounding must be a positive multiple, got " + std::to_string(n));
  return [n](const ThinnedTensor& t) { return std::min(t.dense, (t.kept + n - 1) / n * n); };
}

ThinningPlan plan_thinning(const torch::nn::Module& model, const SummaryGraph& graph,
                           ThinningKind kind, const WidthPolicy& width) {
  torch::NoGradGuard no_grad;
  refuse_quantized(model);
  refuse_quantized(graph);
  return Planner(model, graph, kind, width).plan();
}

void thin_for_training(torch::nn::Module& model, const nlohmann::json& recipe,
                       torch::optim::Optimizer* optimizer, MaskTable* masks) {
  refuse_quantized(model);
  auto params = model.named_parameters();
  // Entry by entry, so a weight thinned in two dimensions has its state cut twice in step.
  apply_thinning_recipe(
      model, recipe, "thinning",
      [&](const std::string& name, const at::Tensor& t, int64_t dim,
          const std::vector<int64_t>& keep) {
        if (optimizer && params.contains(name)) slice_optimizer_state(*optimizer, t, dim, keep);
        if (!masks) return;
        auto it = masks->find(name);
        if (it != masks->end() && it->second.dim() > dim)
          it->second =
              it->second.index_select(dim, index_tensor(keep, it->second.device())).contiguous();
      });
}

}  // namespace igb::compress
