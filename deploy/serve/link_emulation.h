// The emulated link of igb-serve's worker, master and client (no gRPC header needed).
#pragma once

namespace igb::deploy {

/// A slower link than the real one, emulated in the sender (docs/serving.md#links): each message
/// holds the link for bytes / bandwidth, then arrives `latency_ms` later without holding it (the
/// stage model of docs/partition.md). Zero bandwidth: as fast as the network.
struct LinkEmulation {
  /// MB/s (10^6 bytes).
  double bandwidth_mb_s = 0;
  double latency_ms = 0;
};

}  // namespace igb::deploy
