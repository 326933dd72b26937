#include "data/patch_plan.h"

#include <algorithm>
#include <cmath>

namespace igb::data {

PatchPlan::PatchPlan(size_t images, int64_t per_image, const std::vector<int64_t>& counts)
    : images_(images) {
  if (counts.empty()) {
    size_ = static_cast<int64_t>(images) * per_image;
    return;
  }
  for (const int64_t n : counts) ends_.push_back(size_ += n);
}

size_t PatchPlan::image(int64_t index) const {
  if (ends_.empty()) return static_cast<size_t>(index) % images_;
  return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), index) - ends_.begin());
}

std::vector<int64_t> patches_by_area(const std::vector<at::Tensor>& images, int64_t per_image,
                                     int64_t reference_side) {
  const auto reference = static_cast<double>(reference_side * reference_side);
  std::vector<int64_t> out;
  out.reserve(images.size());
  for (const auto& img : images) {
    const auto area = static_cast<double>(img.size(-2) * img.size(-1));
    out.push_back(
        std::max<int64_t>(1, std::llround(static_cast<double>(per_image) * area / reference)));
  }
  return out;
}

std::vector<int64_t> share_by_area(const std::vector<at::Tensor>& images, int64_t total) {
  double sum = 0;
  for (const auto& img : images) sum += static_cast<double>(img.size(-2) * img.size(-1));
  std::vector<int64_t> out;
  out.reserve(images.size());
  for (const auto& img : images) {
    const auto area = static_cast<double>(img.size(-2) * img.size(-1));
    out.push_back(
        std::max<int64_t>(1, std::llround(static_cast<double>(total) * area / std::max(sum, 1.0))));
  }
  return out;
}

}  // namespace igb::data
