#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compress/channel_groups.h"
#include "compress/pruners.h"
#include "graph/summary_graph.h"

namespace igb::compress {

/// Distiller's two thinning functions.
enum class ThinningKind {
  /// remove_filters: output channels whose filters (and biases) are zero in every producer.
  kFilters,
  /// remove_channels: channels every consumer reads with all-zero weights.
  kChannels,
};

/// What a thinning would do: the recipe (core/thinning_recipe.h) and a log line per layer.
struct ThinningPlan {
  nlohmann::json recipe;
  std::vector<std::string> log;
  /// Channel groups removed (a group spans every tensor whose channels are tied to it).
  int64_t removed_groups = 0;
  /// Zeroed channel groups that could have been removed but stay so that channel counts are
  /// the widths a WidthPolicy asked for (the sparsity rounding gives up).
  int64_t rounded_groups = 0;
  bool empty() const { return removed_groups == 0; }
};

/// A set of tensors thinning narrows alike (their channels are the same channel groups, in the
/// same order: a convolution's output, the BatchNorm and ReLU after it, the residual adds tied
/// to it), as a WidthPolicy sees it.
struct ThinnedTensor {
  /// The graph being thinned.
  const graph::SummaryGraph* graph = nullptr;
  /// The tensors (summary-graph value ids), in graph order.
  std::vector<int> values;
  /// Channels before thinning, and left with every removable group removed (so far).
  int64_t dense = 0;
  int64_t kept = 0;
  /// The convolutions, transposed convolutions and linear layers that write (producers) and
  /// read (consumers) these tensors: the ops whose cost follows the width.
  std::vector<const graph::OpNode*> producers, consumers;
  /// The channels other tensors keep so far (a consumer's output, a producer's input); valid
  /// during the policy's call only.
  std::function<int64_t(int value)> kept_of;
};

/// The channel count a thinned tensor keeps, in [kept, dense]: zeroed channels it keeps on top
/// of `kept` stay in the model (they compute zeros) so the count is a width the kernels run fast.
using WidthPolicy = std::function<int64_t(const ThinnedTensor&)>;

/// Rounds every thinned width up to a multiple of `n` (at most the dense width); n = 1 keeps it.
WidthPolicy round_to_multiple(int64_t n);

/// Plans the physical removal of pruned structures, following the summary graph.
///
/// The channels of every tensor in the graph are tied into groups: an op that keeps channels in
/// place (normalisation, activations, pooling, residual add, depthwise convolution) ties its
/// input channel c to its output channel c; a concat ties each input's channels to their offset
/// in the output; a flatten ties a channel to its block of H·W features; a pixel shuffle ties r²
/// input channels to one output channel; a channel pad ties its input to the middle of its output.
/// A group is removed only as a whole and only when that provably leaves the model's output
/// unchanged: for kFilters, every producer (conv, transposed conv, linear) writing into it has a
/// zero filter and bias there and every op on the way maps zero to zero (BatchNorm with zero
/// affine terms, ReLU, add, …); for kChannels, every consumer reads it with zero weights. Groups
/// touching the model's input or output, or an op the walk does not understand (a channel slice,
/// a grouped non-depthwise conv), are never removed. A tensor always keeps at least one channel.
/// A quantized model (a layer with weight bits, a fake-quantizing activation) is refused with
/// InputError "<layer> is quantized; thin before quantizing".
///
/// With a `width` policy, each set of tensors narrowed alike (ThinnedTensor) then keeps as many
/// of its removable groups, in channel order, as the policy's width asks for; a kept group widens
/// every tensor it spans, so the policy is asked again until no width changes. The log names each
/// rounded width ("layer1.0.conv1: 2 zeroed filters kept to round 6 channels to 8").
ThinningPlan plan_thinning(const torch::nn::Module& model, const graph::SummaryGraph& graph,
                           ThinningKind kind, const WidthPolicy& width = {});

/// Applies a recipe to a model being trained: weights, gradients and module options
/// (apply_thinning_recipe), and alike the optimizer's per-parameter state (SGD momentum, Adam
/// and AdamW moments, RMSprop and Adagrad sums) and the scheduler's masks, so training goes on
/// in the same run. A quantized model is refused as by plan_thinning.
void thin_for_training(torch::nn::Module& model, const nlohmann::json& recipe,
                       torch::optim::Optimizer* optimizer, MaskTable* masks);

}  // namespace igb::compress
