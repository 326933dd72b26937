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
  auto flat = weight.detach().abs().flatten();
  const auto n = flat.numel();
  const auto k = static_cast<int64_t>(std::floor(sparsity * static_cast<double>(n) + 1e-9));
  auto mask = torch::ones({n}, weight.options().dtype(torch::kFloat32));
  if (k > 0) {
    auto order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
    mask.index_fill_(0, order.narrow(0, 0, std::min(k, n)), 0.0);
  }
  return mask.view(weight.sizes());
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
      auto m = mag.mean(1);
      return l2 ? m.sqrt() : m;
    }
  }
  return {};
}

std::vector<int64_t> smallest_groups(const at::Tensor& magnitudes, double fraction) {
  const int64_t n = magnitudes.numel();
  auto k = static_cast<int64_t>(std::floor(fraction * static_cast<double>(n) + 1e-9));
  if (fraction < 1.0) k = std::min(k, n - 1);
  k = std::max<int64_t>(0, std::min(k, n));
  auto order = std::get<1>(magnitudes.sort(/*stable=*/true, 0, false));
  std::vector<int64_t> out;
  for (int64_t i = 0; i < k; ++i) out.push_back(order[i].item<int64_t>());
  std::sort(out.begin(), out.end());
  return out;
}

at::Tensor group_mask(const at::Tensor& weight, GroupType group,
                      const std::vector<int64_t>& pruned) {
  auto mask = torch::ones(weight.sizes(), weight.options().dtype(torch::kFloat32));
  if (pruned.empty()) return mask;
  mask.index_fill_(group == GroupType::kChannels ? 1 : 0, index_tensor(pruned, weight.device()),
                   0.0);
  return mask;
}

double sparsity(const at::Tensor& t) { return zero_fraction(t); }

}  // namespace igb::compress
