#include "compress/masks.h"

#include <cmath>
#include <stdexcept>

#include "core/tensor_util.h"

namespace igb::compress {

GroupType parse_group_type(const std::string& s) {
  if (s == "Filters" || s == "3D") return GroupType::kFilters;
  if (s == "Channels") return GroupType::kChannels;
  if (s == "Rows") return GroupType::kRows;
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
  }
  return {};
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
  auto mask = torch::ones(weight.sizes(), weight.options().dtype(torch::kFloat32));
  if (pruned.empty()) return mask;
  mask.index_fill_(group == GroupType::kFilters ? 0 : 1, index_tensor(pruned, weight.device()),
                   0.0);
  return mask;
}

double sparsity(const at::Tensor& t) { return zero_fraction(t); }

}  // namespace igb::compress
