#include "tests/deploy/net_lab.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <queue>
#include <random>
#include <stdexcept>

#include "core/subprocess.h"

namespace igb::test {

namespace {

using Clock = std::chrono::steady_clock;

/// iproute2's `ip`, or "" when there is none.
std::string ip_program() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return "";
}

/// Runs `ip ARGS`; true when it succeeded.
bool ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ip_program()};
  argv.insert(argv.end(), args.begin(), args.end());
  return wait_process(start_process(argv, "/dev/null")) == 0;
}

void must(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("NetLab: " + what + " failed");
}

/// A TUN interface named `name` (no packet information header), non-blocking.
int open_tun(const std::string& name) {
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("NetLab: /dev/net/tun cannot be opened");
  ifreq ifr{};
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (::ioctl(fd, TUNSETIFF, &ifr) < 0) {
    ::close(fd);
    throw std::runtime_error("NetLab: TUN interface " + name + " cannot be made");
  }
  return fd;
}

}  // namespace

struct NetLab::Packet {
  Clock::time_point due;
  uint64_t order;
  int to;
  size_t link;
  std::string data;
  bool operator>(const Packet& o) const { return due != o.due ? due > o.due : order > o.order; }
};

std::string NetLab::unavailable() {
  if (::geteuid() != 0) return "making network namespaces needs root";
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) return "there is no /dev/net/tun";
  if (ip_program().empty()) return "iproute2's ip is not installed";
  const std::string probe = "igbprobe" + std::to_string(::getpid());
  if (!ip({"netns", "add", probe})) return "ip netns add fails here (no CAP_SYS_ADMIN?)";
  ip({"netns", "del", probe});
  return "";
}

NetLab::NetLab(int hosts, uint64_t seed)
    : hosts_(hosts),
      prefix_("igb" + std::to_string(::getpid())),
      shapes_(static_cast<size_t>(hosts * hosts)),
      counts_(static_cast<size_t>(hosts * hosts)),
      seed_(seed) {
  if (hosts < 1 || hosts > 250) throw std::invalid_argument("NetLab: 1 to 250 hosts");
  // Host 0's address is in this machine's own network: one lab at a time (ctest runs tests in
  // parallel processes); the lock goes with the process however it ends.
  lock_ = ::open("/tmp/igb-netlab.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  must(lock_ >= 0 && ::flock(lock_, LOCK_EX) == 0, "locking /tmp/igb-netlab.lock");
  must(::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) == 0, "pipe");
  for (int h = 0; h < hosts; ++h) {
    const std::string dev = prefix_ + "t" + std::to_string(h);
    fds_.push_back(open_tun(dev));
    if (h == 0) {
      // Host 0 is this process's own network: its interface goes when the relay closes it.
      must(ip({"addr", "add", address(h) + "/24", "dev", dev}), "addressing " + dev);
      must(ip({"link", "set", dev, "up"}), "bringing " + dev + " up");
      continue;
    }
    const std::string ns = prefix_ + "h" + std::to_string(h);
    must(ip({"netns", "add", ns}), "ip netns add " + ns);
    must(ip({"link", "set", dev, "netns", ns}), "moving " + dev + " to " + ns);
    must(ip({"-n", ns, "addr", "add", address(h) + "/24", "dev", dev}), "addressing " + dev);
    must(ip({"-n", ns, "link", "set", dev, "up"}), "bringing " + dev + " up");
    must(ip({"-n", ns, "link", "set", "lo", "up"}), "bringing lo up in " + ns);
  }
  thread_ = std::thread([this] { relay(); });
}

NetLab::~NetLab() {
  stop_ = true;
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : fds_) ::close(fd);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
  for (int h = 1; h < hosts_; ++h) ip({"netns", "del", prefix_ + "h" + std::to_string(h)});
  if (lock_ >= 0) ::close(lock_);
}

void NetLab::shape(int from, int to, const LinkShape& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  shapes_.at(static_cast<size_t>(from * hosts_ + to)) = s;
}

std::string NetLab::address(int host) const { return "10.201.0." + std::to_string(host + 1); }

std::vector<std::string> NetLab::on_host(int host) const {
  if (host == 0) return {};
  return {ip_program(), "netns", "exec", prefix_ + "h" + std::to_string(host)};
}

LinkCount NetLab::count(int from, int to) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_.at(static_cast<size_t>(from * hosts_ + to));
}

/// The relay's state: packets on their way, each link's queue and when its wire is free.
struct NetLab::Relay {
  NetLab& lab;
  std::mt19937_64 rng;
  std::priority_queue<Packet, std::vector<Packet>, std::greater<>> queue;
  std::vector<Clock::time_point> link_free;
  std::vector<int> queued;
  uint64_t order = 0;
  std::vector<char> buf = std::vector<char>(65536);

  Relay(NetLab& l, uint64_t seed)
      : lab(l),
        rng(seed),
        link_free(static_cast<size_t>(l.hosts_ * l.hosts_), Clock::now()),
        queued(static_cast<size_t>(l.hosts_ * l.hosts_), 0) {}

  /// Reads every packet host `from` has sent and queues it on its link, or drops it.
  void take(int from) {
    std::uniform_real_distribution<double> unit(0, 1);
    for (;;) {
      const ssize_t n = ::read(lab.fds_[static_cast<size_t>(from)], buf.data(), buf.size());
      if (n <= 0) return;
      // IPv4 to another host of the lab; anything else (IPv6 router solicitations) is dropped.
      if (n < 20 || (static_cast<unsigned char>(buf[0]) >> 4) != 4) continue;
      const auto* dst = reinterpret_cast<const unsigned char*>(buf.data() + 16);
      const int to = dst[3] - 1;
      if (dst[0] != 10 || dst[1] != 201 || dst[2] != 0 || to < 0 || to >= lab.hosts_) continue;
      const auto link = static_cast<size_t>(from * lab.hosts_ + to);
      LinkShape s;
      {
        std::lock_guard<std::mutex> lock(lab.mutex_);
        s = lab.shapes_[link];
      }
      // netem's default queue limit: 1000 packets.
      const bool lost = unit(rng) < s.loss || queued[link] >= 1000;
      {
        std::lock_guard<std::mutex> lock(lab.mutex_);
        ++(lost ? lab.counts_[link].dropped : lab.counts_[link].relayed);
      }
      if (lost) continue;
      auto sent = Clock::now();
      if (s.bandwidth_mb_s > 0) {
        sent = std::max(sent, link_free[link]) +
               std::chrono::nanoseconds(
                   static_cast<int64_t>(static_cast<double>(n) / (s.bandwidth_mb_s * 1e6) * 1e9));
        link_free[link] = sent;
      }
      const bool early = unit(rng) < s.reorder;
      const auto due =
          sent + std::chrono::microseconds(static_cast<int64_t>(early ? 0 : s.delay_ms * 1e3));
      ++queued[link];
      queue.push({due, order++, to, link, std::string(buf.data(), static_cast<size_t>(n))});
    }
  }

  /// Hands every packet that is due to its host; the ms until the next one (at most 100).
  int flush() {
    const auto now = Clock::now();
    while (!queue.empty() && queue.top().due <= now) {
      const Packet& p = queue.top();
      (void)!::write(lab.fds_[static_cast<size_t>(p.to)], p.data.data(), p.data.size());
      --queued[p.link];
      queue.pop();
    }
    if (queue.empty()) return 100;
    const auto wait =
        std::chrono::duration_cast<std::chrono::microseconds>(queue.top().due - now).count();
    return static_cast<int>(std::min<int64_t>(100, (wait + 999) / 1000));
  }
};

void NetLab::relay() {
  Relay r(*this, seed_);
  std::vector<pollfd> polls;
  for (int fd : fds_) polls.push_back({fd, POLLIN, 0});
  polls.push_back({wake_[0], POLLIN, 0});
  int timeout_ms = 100;
  while (!stop_) {
    ::poll(polls.data(), polls.size(), timeout_ms);
    for (int from = 0; from < hosts_; ++from) r.take(from);
    char drain[64];
    while (::read(wake_[0], drain, sizeof drain) > 0) {
    }
    timeout_ms = r.flush();
  }
}

}  // namespace igb::test
