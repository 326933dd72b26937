#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>

namespace igb {

class Distributed;
class Logger;

/// What one run of a driver shares with everything it calls: where it writes, how it logs, which
/// device and seed it uses. Passed explicitly; there are no global singletons.
struct RunContext {
  Logger* logger = nullptr;
  /// The run directory (created once inputs are validated).
  std::filesystem::path out_dir;
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  uint64_t seed = 0;
  /// Whether progress may redraw a status line.
  bool terminal = false;
  /// The data-parallel job this process is a rank of; null when it trains alone.
  Distributed* dist = nullptr;
  /// Only check what a run needs (options, data, model, schedule, its first batch) and stop
  /// before anything is created or written: the launcher of --nproc checks a job once this way
  /// before it starts the ranks.
  bool check_only = false;
};

}  // namespace igb
