#pragma once

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace igb::deploy {

/// One device of the chain as a devices file describes it.
struct DeviceSpec {
  std::string name;
  /// A layer cost file (resolved against the devices file's folder), or empty for "measured":
  /// the costs this machine measures (cached).
  std::filesystem::path costs;
  /// How many times faster than its cost source the device runs: a cost is divided by it.
  double speed = 1;
  /// Bytes of parameters the device may hold; +infinity for no limit.
  double memory_bytes = std::numeric_limits<double>::infinity();
};

/// The link from device i to device i + 1.
struct LinkSpec {
  /// Bytes per second (the file gives MB/s, 10^6 bytes).
  double bandwidth = 0;
  double latency_ms = 0;
  /// Work every message costs whatever its size (encoding, the call, decoding), ms.
  double message_ms = 0;
};

/// A chain of devices (docs/partition.md):
///
///   devices:
///     - {name: camera, costs: measured, speed: 0.1, memory_mb: 256}
///     - {name: edge, costs: edge_costs.json}
///     - {name: cloud, costs: measured, speed: 8}
///   links:
///     - {bandwidth_mb_s: 6.3, latency_ms: 2}
///     - {bandwidth_mb_s: 0.68, latency_ms: 20}
///   frames_from: camera    # default: the first device
///   results_to: cloud      # default: the last device
struct DevicesFile {
  std::filesystem::path file;
  std::vector<DeviceSpec> devices;
  std::vector<LinkSpec> links;
  int source = 0;
  int sink = 0;
};

/// Reads a devices file strictly, as schedules are read: unknown or misspelt keys, missing ones,
/// a link count that is not one less than the devices, duplicate names, non-positive or
/// non-finite numbers each end in one InputError naming file:line.
DevicesFile load_devices_file(const std::filesystem::path& file);

}  // namespace igb::deploy
