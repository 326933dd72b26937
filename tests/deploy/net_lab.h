// Hosts for the serving tests that are not this process's loopback: a Linux network namespace per
// host (host 0: this process's own), each with a TUN interface whose packets a thread of the test
// process relays to the host they are addressed to, through links that delay, lose, reorder and
// rate-limit them as `tc qdisc ... netem delay D loss L reorder R rate B` would
// (docs/serving.md#links-that-lose-packets). The kernel's own TCP runs on both ends:
// retransmission, congestion control and reordering are real. Needs root (CAP_NET_ADMIN),
// /dev/net/tun and iproute2's `ip`.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace igb::test {

/// One direction of a link between two hosts.
struct LinkShape {
  /// Added to every packet, ms.
  double delay_ms = 0;
  /// Share of packets dropped, and of packets sent without the delay (overtaking those queued).
  double loss = 0, reorder = 0;
  /// Bytes per second the link carries (10^6 bytes a MB); 0: no limit.
  double bandwidth_mb_s = 0;
};

/// Packets one direction of a link relayed and dropped.
struct LinkCount {
  int64_t relayed = 0, dropped = 0;
};

class NetLab {
 public:
  /// Why hosts cannot be made here ("" when they can): not root, no /dev/net/tun, no `ip`.
  static std::string unavailable();

  /// `hosts` hosts at address(i): host 0 this process's own network (an interface added to it),
  /// the others each a namespace of its own; packets between hosts not shaped go through
  /// unchanged. `seed` seeds the losses and reorderings.
  NetLab(int hosts, uint64_t seed);
  /// Stops the relay and removes the namespaces (their interfaces go with them).
  ~NetLab();
  NetLab(const NetLab&) = delete;
  NetLab& operator=(const NetLab&) = delete;

  /// Shapes packets from host `from` to host `to` (one direction).
  void shape(int from, int to, const LinkShape& s);
  /// Host i's IPv4 address (10.201.0.i+1).
  std::string address(int host) const;
  /// The command prefix that runs a program on host i ({"ip", "netns", "exec", NAME}; none for
  /// host 0).
  std::vector<std::string> on_host(int host) const;
  LinkCount count(int from, int to) const;

 private:
  struct Packet;
  struct Relay;
  void relay();

  int hosts_;
  std::string prefix_;
  std::vector<int> fds_;
  int wake_[2] = {-1, -1};
  int lock_ = -1;
  mutable std::mutex mutex_;
  std::vector<LinkShape> shapes_;
  std::vector<LinkCount> counts_;
  uint64_t seed_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace igb::test
