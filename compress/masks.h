#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace igb::compress {

/// Structures a ranked pruner removes: whole filters (output channels, Distiller's "Filters" or
/// "3D"), input channels ("Channels"), or rows of a 2-D weight ("Rows", a linear layer's outputs).
enum class GroupType { kFilters, kChannels, kRows };

/// Parses "Filters", "3D", "Channels", "Rows"; throws std::invalid_argument otherwise.
GroupType parse_group_type(const std::string& s);
std::string group_type_name(GroupType g);

/// Mask (1 keep, 0 prune) zeroing exactly floor(sparsity · numel) elements of `weight`: the ones
/// with the smallest magnitude (ties broken by position). Ranking uses the weight as it is, so a
/// weight that is already masked keeps its zeros and pruning only grows.
at::Tensor level_mask(const at::Tensor& weight, double sparsity);

/// Mask keeping elements with |w| > threshold.
at::Tensor threshold_mask(const at::Tensor& weight, double threshold);

/// Magnitude of each group of `weight`: mean |w| (L1 normalised by size; `l2` = root mean square)
/// over each filter, input channel or row.
at::Tensor group_magnitudes(const at::Tensor& weight, GroupType group, bool l2 = false);

/// Indices of the floor(fraction · N) groups of smallest magnitude (never all N unless fraction
/// is 1), sorted ascending.
std::vector<int64_t> smallest_groups(const at::Tensor& magnitudes, double fraction);

/// A mask of `weight`'s shape zeroing the given groups.
at::Tensor group_mask(const at::Tensor& weight, GroupType group,
                      const std::vector<int64_t>& pruned);

/// Fraction of zeros.
double sparsity(const at::Tensor& t);

}  // namespace igb::compress
