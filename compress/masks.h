#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace igb::compress {

/// Structures a ranked pruner removes: whole filters (output channels, Distiller's "Filters" or
/// "3D"), input channels ("Channels"), or Distiller's "Rows" of a 2-D weight, which are its input
/// columns: Distiller's tables show linear weights transposed, and its ranked `Rows` pruner ranks
/// and zeroes W[:, j] (as `Channels` does on a 2-D weight), never an output row or the bias.
/// "Blocks" are Distiller's blocks of a 4-D weight, shaped by a block_shape (block_magnitudes()).
enum class GroupType { kFilters, kChannels, kRows, kBlocks };

/// Parses "Filters", "3D", "Channels", "Rows", "Blocks"; throws std::invalid_argument otherwise.
GroupType parse_group_type(const std::string& s);
std::string group_type_name(GroupType g);

/// Mask (1 keep, 0 prune) of Distiller's level pruning: with k = floor(sparsity · numel) (no
/// rounding slack: 0.58 · 50 is 28.999… in double, so 28), the threshold is the k-th smallest |w|
/// and every element with |w| at or below it is zeroed, so ties at the threshold all go and at
/// least k elements are zeroed. k = 0 zeroes nothing. Ranking uses the weight as it is, so a
/// weight that is already masked keeps its zeros.
at::Tensor level_mask(const at::Tensor& weight, double sparsity);

/// Mask keeping elements with |w| > threshold (ties at the threshold are pruned).
at::Tensor threshold_mask(const at::Tensor& weight, double threshold);

/// Magnitude of each group of `weight`: mean |w| (L1 normalised by size; `l2` = root mean square)
/// over each filter, input channel or (kRows, 2-D only) input column.
at::Tensor group_magnitudes(const at::Tensor& weight, GroupType group, bool l2 = false);

/// Why `block_shape` [repetitions, depth, height, width] cannot cut `weight` into Distiller's
/// blocks (height and width must be 1, the weight 4-D, and the blocks must tile it), or "" when it
/// can.
std::string block_shape_problem(const at::Tensor& weight, const std::vector<int64_t>& block_shape);

/// Magnitude of each of Distiller's blocks of a 4-D weight [F, C, kH, kW] for block_shape [R, D, 1,
/// 1] (mean |w|, or root mean square with `l2`). With D > 1 a block is R·D consecutive (filter,
/// input channel) kernels at one kernel position: the weight viewed as [F·C/(R·D), R·D, kH·kW],
/// blocks along the first and last dimensions. With D = 1 a block is R consecutive filters at one
/// (channel, position): the weight viewed as [F/R, R, C·kH·kW]. Block_shape_problem() must be "".
at::Tensor block_magnitudes(const at::Tensor& weight, const std::vector<int64_t>& block_shape,
                            bool l2 = false);

/// A mask of `weight`'s shape zeroing the given blocks (indices into block_magnitudes()).
at::Tensor block_mask(const at::Tensor& weight, const std::vector<int64_t>& block_shape,
                      const std::vector<int64_t>& pruned);

/// Distiller's count of structures pruned out of `n` for `fraction`: floor(fraction · n) with no
/// rounding slack, and n − 1 instead of all n unless fraction is 1.
int64_t structures_to_prune(int64_t n, double fraction);

/// Indices, sorted ascending, of the groups a ranked pruner removes: with k =
/// structures_to_prune(N, fraction), every group whose magnitude is at or below the k-th
/// smallest (so ties at that threshold all go, possibly more than k). Empty when k = 0.
std::vector<int64_t> smallest_groups(const at::Tensor& magnitudes, double fraction);

/// A mask of `weight`'s shape zeroing the given groups (filters along dimension 0, channels and
/// Distiller's 2-D "Rows" along dimension 1).
at::Tensor group_mask(const at::Tensor& weight, GroupType group,
                      const std::vector<int64_t>& pruned);

/// Fraction of zeros.
double sparsity(const at::Tensor& t);

}  // namespace igb::compress
