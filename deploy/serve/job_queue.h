// The frames a stage worker has accepted and not yet run, queued for its compute threads under
// --max-queue. Internal to deploy/serve/; StageWorker::Impl (serve_worker.cpp) states the worker's
// locking order.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "deploy/serve/wire.h"
#include "deploy/serve/worker_role.h"

namespace igb::deploy {

/// A frame accepted for a role: the message without its tensors, and its inputs decoded by value
/// id (-1: an exit's logits, once it answers).
struct Job {
  std::shared_ptr<WorkerRole> role;
  proto::Frame head;
  std::map<int, at::Tensor> values;
  std::chrono::steady_clock::time_point queued;
  int64_t bytes_in = 0;
};

/// Closing the queue is how a worker stops: the compute threads end, deliveries are refused and
/// StageWorker::wait() returns.
class JobQueue {
 public:
  /// `capacity`: frames held at most (WorkerOptions::max_queue; 0: no limit).
  explicit JobQueue(int capacity) : capacity_(capacity) {}

  /// Queues `job`, waiting until `until` for room under the capacity (a closed queue always has
  /// room). False when none came, with the frames held then in `*held`.
  bool push(std::unique_ptr<Job> job, std::chrono::steady_clock::time_point until, size_t* held);
  /// The oldest job, waiting for one; null once the queue is closed.
  std::unique_ptr<Job> pop();
  /// Closes the queue; returns whether it was closed already.
  bool close();
  bool closed();
  /// Blocks until the queue is closed.
  void wait_closed();

 private:
  const int capacity_;
  std::mutex mutex_;
  /// changed_: a job queued, or the queue closed; space_: room under the capacity; closed_once_:
  /// the queue closed.
  std::condition_variable changed_, space_, closed_once_;
  bool closed_ = false;
  std::deque<std::unique_ptr<Job>> jobs_;
};

}  // namespace igb::deploy
