#include "compress/masks.h"

#include <cmath>
#include <stdexcept>

#include "core/tensor_util.h"

namespace igb::compress {

GroupType parse_group_type(const std::string& s) {
  if (s == "Filters" || s == "3D") return GroupType::kFilters;
  if (s == "Channels") return GroupType::kChannels;
  if (s == "Rows") return GroupType::kRows;
  if (s == "Blocks") return GroupType::kBlocks;
  throw std::invalid_argument(s);
}

std::string group_type_name(GroupType g) {
  switch (g) {
    case GroupType::kFilters:
      return "Filters";
    case GroupType::kChannels:
      return "Channels";
    case GroupType::kRows:
      return "Rows";
    case GroupType::kBlocks:
      return "Blocks";
  }
  return "?";
}

at::Tensor level_mask(const at::Tensor& weight, double sparsity) {
  auto mag = weight.detach().abs();
  const auto n = mag.numel();
  const auto k = std::min(n, static_cast<int64_t>(std::floor(sparsity * static_cast<double>(n))));
  if (k <= 0) return torch::ones(weight.sizes(), weight.options().dtype(torch::kFloat32));
  const auto threshold = std::get<0>(mag.flatten().kthvalue(k));
  return mag.gt(threshold).to(torch::kFloat32);
}

at::Tensor threshold_mask(const at::Tensor& weight, double threshold) {
  return weight.detach().abs().gt(threshold).to(torch::kFloat32);
}

at::Tensor group_magnitudes(const at::Tensor& weight, GroupType group, bool l2) {
  auto w = weight.detach();
  auto mag = l2 ? w.pow(2) : w.abs();
  switch (group) {
    case GroupType::kFilters: {
      auto m = mag.flatten(1).mean(1);
      return l2 ? m.sqrt() : m;
    }
    case GroupType::kChannels: {
      if (w.dim() < 2)
        throw std::invalid_argument("channel ranking needs a weight of 2 or more dimensions");
      auto m = mag.transpose(0, 1).flatten(1).mean(1);
      return l2 ? m.sqrt() : m;
    }
    case GroupType::kRows: {
      if (w.dim() != 2) throw std::invalid_argument("row ranking needs a 2-D weight");
      auto m = mag.mean(0);
      return l2 ? m.sqrt() : m;
    }
    case GroupType::kBlocks:
      throw std::invalid_argument("block ranking needs a block shape: use block_magnitudes");
  }
  return {};
}

namespace {

// The view whose dimension 1 runs over one block (block_magnitudes()).
std::vector<int64_t> block_view(const at::Tensor& w, const std::vector<int64_t>& shape) {
  const int64_t reps = shape[0], depth = shape[1];
  const int64_t filters = w.size(0), channels = w.size(1), kernel = w.size(2) * w.size(3);
  if (depth > 1) return {filters * channels / (reps * depth), reps * depth, kernel};
  return {filters / reps, reps, channels * kernel};
}

}  // namespace

std::string block_shape_problem(const at::Tensor& w, const std::vector<int64_t>& shape) {
  auto str = [](int64_t v) { return std::to_string(v); };
  if (shape.size() != 4)
    return "block_shape has " + str(static_cast<int64_t>(shape.size())) +
           " values; it is [block_repetitions, block_depth, block_height, block_width]";
  for (auto v : shape)
    if (v < 1) return "block_shape values must be at least 1";
  if (shape[2] != 1 || shape[3] != 1)
    return "block_shape must be [repetitions, depth, 1, 1] (Distiller supports no other)";
  if (w.dim() != 4) return "Blocks pruning needs a 4-D (conv) weight";
  const int64_t reps = shape[0], depth = shape[1];
  if (depth > 1 && (w.size(0) * w.size(1)) % (reps * depth) != 0)
    return "blocks of " + str(reps * depth) + " kernels do not tile the " + str(w.size(0)) + "×" +
           str(w.size(1)) + " kernels of the weight";
  if (depth == 1 && w.size(0) % reps != 0)
    return "blocks of " + str(reps) + " filters do not tile the weight's " + str(w.size(0)) +
           " filters";
  return "";
}

at::Tensor block_magnitudes(const at::Tensor& weight, const std::vector<int64_t>& shape, bool l2) {
  auto v = weight.detach().reshape(block_view(weight, shape));
  auto m = l2 ? v.pow(2).mean(1).sqrt() : v.abs().mean(1);
  return m.flatten();
}

at::Tensor block_mask(const at::Tensor& weight, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& pruned) {
  const auto view = block_view(weight, shape);
  auto map = torch::ones({view[0] * view[2]}, weight.options().dtype(torch::kFloat32));
  if (!pruned.empty()) map.index_fill_(0, index_tensor(pruned, weight.device()), 0.0);
  return map.view({view[0], 1, view[2]}).expand(view).reshape(weight.sizes()).contiguous();
}

int64_t structures_to_prune(int64_t n, double fraction) {
  auto k = static_cast<int64_t>(std::floor(fraction * static_cast<double>(n)));
  k = std::max<int64_t>(0, std::min(k, n));
  if (k == n && fraction != 1.0) k = n - 1;
  return k;
}

std::vector<int64_t> smallest_groups(const at::Tensor& magnitudes, double fraction) {
  const auto flat = magnitudes.detach().flatten();
  const int64_t k = structures_to_prune(flat.numel(), fraction);
  std::vector<int64_t> out;
  if (k == 0) return out;
  const auto threshold = std::get<0>(flat.kthvalue(k));
  const auto pruned = flat.le(threshold).nonzero().flatten().to(torch::kInt64).contiguous();
  const auto* p = pruned.data_ptr<int64_t>();
  out.assign(p, p + pruned.numel());
  return out;
}

at::Tensor group_mask(const at::Tensor& weight, GroupType group,
                      const std::vector<int64_t>& pruned) {
  if (group == GroupType::kBlocks)
    throw std::invalid_argument("a block mask needs a block shape: use block_mask");
  auto mask = torch::ones(weight.sizes(), weight.options().dtype(torch::kFloat32));
  if (pruned.empty()) return mask;
  mask.index_fill_(group == GroupType::kFilters ? 0 : 1, index_tensor(pruned, weight.device()),
                   0.0);
  return mask;
}

double sparsity(const at::Tensor& t) { return zero_fraction(t); }

}  // namespace igb::compress
