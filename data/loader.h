#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "data/dataset.h"

namespace igb::data {

/// Options of a BatchLoader.
struct LoaderOptions {
  /// Examples per batch.
  int64_t batch_size = 16;
  /// Visit the examples in a fresh seeded order every epoch.
  bool shuffle = true;
  /// Skip the last batch when it is smaller than batch_size.
  bool drop_last = true;
  /// Threads assembling batches ahead of the training loop; 0 builds them on the caller's thread.
  int64_t workers = 2;
  /// Seed of the shuffling order.
  uint64_t seed = 0;
  /// Data-parallel sharding: this process takes every `world_size`-th batch-sized slice of the
  /// epoch's order, starting at slice `rank`. Batch b of rank r then holds the examples of
  /// positions [(b·world_size + r)·batch_size, +batch_size), so the ranks' batches b together are
  /// the batch b of one process with batch_size·world_size, in the same order.
  int64_t rank = 0;
  int64_t world_size = 1;
};

/// Stacks examples into batches, with `workers` threads working ahead. The order and content of
/// every batch depend only on (seed, epoch), never on the number of workers. The worker threads
/// live as long as the loader: a thread started per batch cost LibTorch a new OpenMP team and a
/// rebuilt thread pool (whose fresh threads spin for tens of milliseconds) at every batch.
class BatchLoader {
 public:
  BatchLoader(const Dataset& dataset, LoaderOptions options);
  ~BatchLoader();

  /// Batches per epoch (capped by `max_batches` when it is positive); with sharding, the same on
  /// every rank (the examples of an incomplete last round are skipped).
  int64_t batches() const;
  void set_max_batches(int64_t max_batches) { max_batches_ = max_batches; }

  /// Starts an epoch: computes its order and begins prefetching.
  void start_epoch(int64_t epoch);
  /// Fills `batch` with the next batch; false at the end of the epoch.
  bool next(Example& batch);

  /// The example order of `epoch` (for tests).
  std::vector<int64_t> order(int64_t epoch) const;

 private:
  Example make_batch(int64_t b) const;
  void drain();
  /// Queues batch `b` for the worker threads (started on first use).
  void submit(int64_t b);
  void work();

  const Dataset& dataset_;
  LoaderOptions options_;
  int64_t max_batches_ = 0;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;
  int64_t next_submit_ = 0, next_take_ = 0;
  std::deque<std::future<Example>> pending_;

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::pair<int64_t, std::promise<Example>>> jobs_;
  bool stopping_ = false;
};

}  // namespace igb::data
