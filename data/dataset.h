#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace igb::data {

/// One training example: network input and target (a tensor of class indices for classifiers).
struct Example {
  at::Tensor input;
  at::Tensor target;
};

/// A map-style dataset whose examples may depend on the epoch (random crops, flips), but only
/// through the arguments: `get(i, epoch)` is a pure function, so loading is deterministic for a
/// seed whatever the number of workers, and a resumed run sees the same data as a straight one.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index, int64_t epoch) const = 0;
};

}  // namespace igb::data
