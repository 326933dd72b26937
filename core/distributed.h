#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace igb {

/// Where one process stands in a data-parallel job, as torchrun, Slurm or Kubernetes describe it
/// in the environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT).
struct DistEnv {
  int64_t rank = 0;
  int64_t world_size = 1;
  int64_t local_rank = 0;
  /// Processes of the job on this machine (they share its cores).
  int64_t local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
};

/// The job this process belongs to, from the environment; nothing when WORLD_SIZE is unset. A
/// malformed or inconsistent variable is an InputError naming it.
std::optional<DistEnv> dist_env_from_environment();

/// A data-parallel group of processes on PyTorch's c10d: a TCPStore at MASTER_ADDR:MASTER_PORT
/// (served by rank 0) for the rendezvous and a Gloo process group for the collectives. Every
/// collective is called by every rank in the same order. A rank that dies makes the others'
/// next collective fail at once ("connection closed"); one that hangs makes it fail after
/// `timeout`; both throw std::runtime_error with a one-line message naming this rank and the
/// operation.
class Distributed {
 public:
  Distributed(const DistEnv& env, std::chrono::milliseconds timeout);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int64_t rank() const { return env_.rank; }
  int64_t world_size() const { return env_.world_size; }
  /// Rank 0: the one that writes checkpoints, logs and reports.
  bool is_main() const { return env_.rank == 0; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// Overwrites every rank's `tensors` with rank 0's (CPU tensors of any type), packed into
  /// buckets as average() packs them.
  void broadcast(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 4 << 20);
  /// Replaces each tensor by its mean over the ranks, in place. Tensors are packed into buckets
  /// of at most `bucket_bytes` of one dtype; every bucket's all-reduce is started before the
  /// first is waited for.
  void average(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes = 4 << 20);
  /// The sum of `values` over the ranks.
  std::vector<double> sum(const std::vector<double>& values);
  /// True when `flag` is true on any rank.
  bool any(bool flag);
  /// Returns once every rank has called it.
  void barrier();

  /// Seconds this rank spent in average(), and the number of calls.
  double average_seconds() const { return average_seconds_; }
  int64_t average_calls() const { return average_calls_; }

 private:
  struct Impl;
  /// Packs `tensors` into buckets and broadcasts them from rank 0, or averages them.
  void bucketed(const std::vector<at::Tensor>& tensors, int64_t bucket_bytes, bool broadcast);
  void fail(const std::string& operation, const std::exception& e) const;

  DistEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Impl> impl_;
  double average_seconds_ = 0;
  int64_t average_calls_ = 0;
};

/// The gradients of `params` (those that require one), every rank's list the same: a parameter
/// without a gradient gets a zero one, so all ranks reduce the same tensors.
std::vector<at::Tensor> gradients_for_reduction(const std::vector<at::Tensor>& params);

}  // namespace igb
