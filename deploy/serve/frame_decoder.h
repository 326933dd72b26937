// The receiving end of a worker's link: a delivered frame's tensors decoded into a job, with a
// stream's differences taken in order. Internal to deploy/serve/; StageWorker::Impl
// (serve_worker.cpp) states the worker's locking order.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "deploy/serve/job_queue.h"
#include "deploy/serve/wire.h"
#include "deploy/serve/worker_role.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

class FrameDecoder {
 public:
  /// `graph` (the shapes inputs must have) must outlive the decoder.
  explicit FrameDecoder(const graph::SummaryGraph& graph) : graph_(graph) {}

  /// Decodes `frame`'s tensors (`by_name`) into `job` with the role's decoders, taking a
  /// stream's differences in order: a frame ahead of the next waits for the frames before it, up
  /// to half the role's timeout from `received`. A refusal says `what` (the frame) is wrong.
  grpc::Status decode(const proto::Frame& frame,
                      const std::map<std::string, const proto::Tensor*>& by_name,
                      std::chrono::steady_clock::time_point received, const std::string& what,
                      WorkerRole& role, Job& job);
  /// Ends every wait for an earlier frame (the worker is shutting down).
  void stop();

 private:
  const graph::SummaryGraph& graph_;
  std::mutex mutex_;
  /// A frame was decoded (a role's last_seq moved), or the decoder stopped.
  std::condition_variable decoded_;
  bool stopping_ = false;
};

}  // namespace igb::deploy
