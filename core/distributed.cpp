#include "core/distributed.h"

// c10d declares ProcessGroupGloo only under this macro (Debian's LibTorch is built with Gloo).
#define USE_C10D_GLOO 1
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>
#include <glog/logging.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <limits>
#include <map>

#include "core/error.h"

namespace igb {

namespace {

/// An environment variable as an integer in [min, max]; nothing when unset.
std::optional<int64_t> env_int(const char* name, int64_t min, int64_t max) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  const std::string s(v);
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size())
    throw InputError(std::string("environment variable ") + name + " is '" + s +
                     "', not an integer");
  if (n < min || n > max)
    throw InputError(std::string("environment variable ") + name + " is " + s + ", outside [" +
                     std::to_string(min) + ", " + std::to_string(max) + "]");
  return n;
}

/// The first line of a library error, without its "[file:line] " source location.
std::string library_message(const std::exception& e) {
  std::string s;
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e))
    s = c10->what_without_backtrace();
  else
    s = e.what();
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  if (!s.empty() && s.front() == '[') {
    auto close = s.find("] ");
    if (close != std::string::npos) s = s.substr(close + 2);
  }
  return s;
}

/// `ms` in seconds, as short as exact to a tenth ("300", "1.5").
std::string seconds_text(std::chrono::milliseconds ms) {
  const int64_t tenths = (ms.count() + 50) / 100;
  return std::to_string(tenths / 10) + (tenths % 10 ? "." + std::to_string(tenths % 10) : "");
}

}  // namespace

std::optional<DistEnv> dist_env_from_environment() {
  constexpr int64_t kMaxRanks = 1 << 16;
  const auto world = env_int("WORLD_SIZE", 1, kMaxRanks);
  if (!world) return std::nullopt;
  DistEnv e;
  e.world_size = *world;
  const auto rank = env_int("RANK", 0, kMaxRanks - 1);
  if (!rank && e.world_size > 1)
    throw InputError("environment variable WORLD_SIZE is " + std::to_string(e.world_size) +
                     " but RANK is not set");
  e.rank = rank.value_or(0);
  if (e.rank >= e.world_size)
    throw InputError("environment variable RANK is " + std::to_string(e.rank) +
                     ", not below WORLD_SIZE " + std::to_string(e.world_size));
  e.local_rank = env_int("LOCAL_RANK", 0, kMaxRanks - 1).value_or(e.rank);
  e.local_world_size = env_int("LOCAL_WORLD_SIZE", 1, kMaxRanks).value_or(e.world_size);
  if (e.local_rank >= e.local_world_size)
    throw InputError("environment variable LOCAL_RANK is " + std::to_string(e.local_rank) +
                     ", not below LOCAL_WORLD_SIZE " + std::to_string(e.local_world_size));
  if (const char* addr = std::getenv("MASTER_ADDR")) {
    e.master_addr = addr;
    if (e.master_addr.empty()) throw InputError("environment variable MASTER_ADDR is empty");
  }
  e.master_port = env_int("MASTER_PORT", 1, 65535).value_or(e.master_port);
  return e;
}

struct Distributed::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

Distributed::Distributed(const DistEnv& env, std::chrono::milliseconds timeout)
    : env_(env), timeout_(timeout), impl_(std::make_unique<Impl>()) {
  // c10d and Gloo log through glog: a connection retry, "Logging before InitGoogleLogging()".
  // Those lines are not the user's; what fails reaches them as one line of ours.
  FLAGS_minloglevel = google::GLOG_FATAL;
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(env_.master_port);
    store_options.isServer = env_.rank == 0;
    store_options.numWorkers = static_cast<size_t>(env_.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = timeout_;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, store_options);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout_);
    // The interface that reaches MASTER_ADDR: loopback for a local job.
    options->devices.push_back(env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost"
                                   ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                   : c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(
        impl_->store, static_cast<int>(env_.rank), static_cast<int>(env_.world_size), options);
  } catch (const std::exception& e) {
    throw std::runtime_error("distributed training: rank " + std::to_string(env_.rank) + " of " +
                             std::to_string(env_.world_size) + " could not join the job at " +
                             env_.master_addr + ":" + std::to_string(env_.master_port) +
                             " within " + seconds_text(timeout_) + " s: " + library_message(e));
  }
}

Distributed::~Distributed() = default;

void Distributed::fail(const std::string& operation, const std::exception& e) const {
  throw std::runtime_error("distributed training: rank " + std::to_string(env_.rank) + " of " +
                           std::to_string(env_.world_size) + ": " + operation +
                           " failed, another rank has stopped or not answered within " +
                           seconds_text(timeout_) + " s (--dist-timeout): " + library_message(e));
}

namespace {

/// `tensors` (defined, non-empty) in buckets of one dtype of at most `bucket_bytes` each, in the
/// order given: the same buckets on every rank.
std::vector<std::vector<at::Tensor>> buckets_of(const std::vector<at::Tensor>& tensors,
                                                int64_t bucket_bytes) {
  std::vector<std::vector<at::Tensor>> buckets;
  std::map<c10::ScalarType, size_t> open;
  std::map<c10::ScalarType, int64_t> open_bytes;
  for (const auto& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    const auto type = t.scalar_type();
    const int64_t bytes = t.numel() * static_cast<int64_t>(t.element_size());
    if (open.find(type) == open.end() || open_bytes[type] + bytes > bucket_bytes) {
      buckets.emplace_back();
      open[type] = buckets.size() - 1;
      open_bytes[type] = 0;
    }
    buckets[open[type]].push_back(t);
    open_bytes[type] += bytes;
  }
  return buckets;
}

at::Tensor flatten(const std::vector<at::Tensor>& bucket) {
  std::vector<at::Tensor> views;
  for (const auto& t : bucket) views.push_back(t.reshape({-1}));
  return at::cat(views);
}

void unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& bucket) {
  int64_t offset = 0;
  for (const auto& t : bucket) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

}  // namespace

void Distributed::bucketed(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes,
                           bool broadcast) {
  // Parameters are overwritten in place, outside autograd.
  at::NoGradGuard no_grad;
  const auto buckets = buckets_of(tensors, bucket_bytes);
  try {
    std::vector<std::vector<at::Tensor>> flat(buckets.size());
    std::vector<c10::intrusive_ptr<c10d::Work>> work;
    for (size_t b = 0; b < buckets.size(); ++b) {
      flat[b] = {flatten(buckets[b])};
      work.push_back(broadcast ? impl_->group->broadcast(flat[b])
                               : impl_->group->allreduce(flat[b]));
    }
    for (size_t b = 0; b < buckets.size(); ++b) {
      work[b]->wait();
      if (broadcast && env_.rank == 0) continue;
      if (!broadcast) flat[b][0].div_(static_cast<double>(env_.world_size));
      unflatten(flat[b][0], buckets[b]);
    }
  } catch (const std::exception& e) {
    fail(broadcast ? "broadcast from rank 0" : "gradient all-reduce", e);
  }
}

void Distributed::broadcast(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  bucketed(tensors, bucket_bytes, /*broadcast=*/true);
}

void Distributed::average(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes) {
  const auto t0 = std::chrono::steady_clock::now();
  bucketed(tensors, bucket_bytes, /*broadcast=*/false);
  average_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++average_calls_;
}

std::vector<double> Distributed::sum(const std::vector<double>& values) {
  if (values.empty()) return {};
  std::vector<at::Tensor> t{at::tensor(values, at::kDouble)};
  try {
    impl_->group->allreduce(t)->wait();
  } catch (const std::exception& e) {
    fail("metric reduction", e);
  }
  const auto a = t[0].accessor<double, 1>();
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = a[static_cast<int64_t>(i)];
  return out;
}

bool Distributed::any(bool flag) { return sum({flag ? 1.0 : 0.0})[0] > 0; }

void Distributed::barrier() {
  // A one-element all-reduce: Gloo's barrier does not honour the timeout on every version.
  sum({0.0});
}

std::vector<at::Tensor> gradients_for_reduction(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> grads;
  for (const auto& p : params) {
    if (!p.requires_grad()) continue;
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace igb
