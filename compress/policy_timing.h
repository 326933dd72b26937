#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace igb::compress {

/// When a policy acts: epochs range(start, end, frequency), end exclusive, or an explicit list.
struct PolicyTiming {
  int64_t start = 0;
  int64_t end = 0;
  int64_t frequency = 1;
  /// When not empty, the policy acts at exactly these epochs (and start/end/frequency are unused).
  std::vector<int64_t> epochs;

  bool active(int64_t epoch) const;
  bool is_range() const { return epochs.empty(); }
  /// First epoch at which the policy acts.
  int64_t first() const;
  /// Last epoch at which the policy acts.
  int64_t last() const;
  /// The policy's final epoch, whose end closes it (a pruning policy's keep_mask acts then):
  /// ending_epoch − 1 for a range, scheduled or not (Distiller's is_last_epoch), the last listed
  /// epoch for a list.
  int64_t final_epoch() const;
  std::string describe() const;
};

}  // namespace igb::compress
