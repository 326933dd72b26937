#include "compress/policy_timing.h"

#include <algorithm>

namespace igb::compress {

bool PolicyTiming::active(int64_t epoch) const {
  if (!epochs.empty()) return std::find(epochs.begin(), epochs.end(), epoch) != epochs.end();
  return epoch >= start && epoch < end && (epoch - start) % frequency == 0;
}

int64_t PolicyTiming::first() const {
  if (!epochs.empty()) return *std::min_element(epochs.begin(), epochs.end());
  return start;
}

int64_t PolicyTiming::final_epoch() const {
  if (!epochs.empty()) return last();
  return end - 1;
}

int64_t PolicyTiming::last() const {
  if (!epochs.empty()) return *std::max_element(epochs.begin(), epochs.end());
  return start + ((end - start - 1) / frequency) * frequency;
}

std::string PolicyTiming::describe() const {
  if (!epochs.empty()) {
    std::string s = "epochs [";
    for (size_t i = 0; i < epochs.size(); ++i) s += (i ? ", " : "") + std::to_string(epochs[i]);
    return s + "]";
  }
  return "epochs " + std::to_string(start) + " to " + std::to_string(end) + " (exclusive) every " +
         std::to_string(frequency);
}

}  // namespace igb::compress
