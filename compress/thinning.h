#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compress/channel_groups.h"
#include "compress/pruners.h"
#include "tools/graph/summary_graph.h"

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
  bool empty() const { return removed_groups == 0; }
};

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
ThinningPlan plan_thinning(const torch::nn::Module& model, const tools::SummaryGraph& graph,
                           ThinningKind kind);

/// Applies a recipe to a model being trained: weights, gradients and module options
/// (apply_thinning_recipe), and alike the optimizer's per-parameter state (SGD momentum, Adam
/// and AdamW moments, RMSprop and Adagrad sums) and the scheduler's masks, so training goes on
/// in the same run. A quantized model is refused as by plan_thinning.
void thin_for_training(torch::nn::Module& model, const nlohmann::json& recipe,
                       torch::optim::Optimizer* optimizer, MaskTable* masks);

}  // namespace igb::compress
