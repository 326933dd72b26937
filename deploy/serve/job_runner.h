// The compute side of a stage worker: runs a job's stage (and a cascade unit's exit), then passes
// the outputs to the next worker or answers the frame's collector. Internal to deploy/serve/;
// StageWorker::Impl (serve_worker.cpp) states the worker's locking order.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "deploy/serve/fallback_cache.h"
#include "deploy/serve/job_queue.h"
#include "deploy/serve/link_sender.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/wire.h"

namespace igb::deploy {

class JobRunner {
 public:
  /// What the runner did so far (a worker's Report).
  struct Counts {
    int64_t frames = 0, errors = 0;
    double compute_ms = 0;
  };

  /// `options` and `address` (the worker's bound address, set before the first job) must outlive
  /// the runner and every sender it makes.
  JobRunner(const WorkerOptions& options, const std::string& address)
      : options_(options), address_(address) {}

  /// Runs `job` on the calling thread, through to its sending or answer.
  void run(Job& job);
  /// The link to the next worker `next` (named `who`); a frame it cannot deliver is answered
  /// with the error, or by a cascade unit from its own exit.
  std::unique_ptr<LinkSender> make_sender(const std::string& next, const std::string& who,
                                          TransferPrecision precision, bool diff,
                                          double timeout_ms);
  /// The connection to a master's (or client's) Collector at `address`, one per address.
  std::shared_ptr<grpc::Channel> collector_channel(const std::string& address);
  Counts counts();

 private:
  /// Answers `job` with the error `e` its stage raised.
  void fail(Job& job, const std::exception& e);
  /// Answers `job` with its outputs (the exit's logits when it has them).
  void answer_job(Job& job, const proto::Hop& hop, const std::string& fallback);
  /// Sends a result to `reply_to`; a reply_to that does not answer loses it (the master's
  /// timeout reports the frame).
  void answer(const std::string& reply_to, const proto::Result& result);

  const WorkerOptions& options_;
  const std::string& address_;
  FallbackCache fallbacks_;
  std::mutex counts_mutex_;
  Counts counts_;
  std::mutex collectors_mutex_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> collectors_;
};

}  // namespace igb::deploy
