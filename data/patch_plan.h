#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace igb::data {

/// Which training image each index of an epoch crops its patch from. With one count for every
/// image, image i mod n (the images interleave); with a count per image (patches_by_area), a
/// block of indices per image.
class PatchPlan {
 public:
  PatchPlan(size_t images, int64_t per_image, const std::vector<int64_t>& counts = {});
  /// Patches an epoch draws.
  int64_t size() const { return size_; }
  /// The image index `index` crops from.
  size_t image(int64_t index) const;

 private:
  size_t images_;
  int64_t size_ = 0;
  /// Where each image's block ends, when the counts differ; else empty.
  std::vector<int64_t> ends_;
};

/// Patches per image that sample every image as densely as `per_image` patches sample a
/// `reference_side`-square image: in proportion to its area ([C, H, W]), at least one.
std::vector<int64_t> patches_by_area(const std::vector<at::Tensor>& images, int64_t per_image,
                                     int64_t reference_side);

/// `total` patches shared among `images` ([C, H, W]) in proportion to their areas, at least one
/// each (so the sum can exceed `total` by a few when some images are tiny).
std::vector<int64_t> share_by_area(const std::vector<at::Tensor>& images, int64_t total);

}  // namespace igb::data
