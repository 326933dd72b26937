// The RPC surface of a stage worker (proto::Worker): takes a master's plan or holds a cascade
// unit's role, accepts frames into the job queue, reports and probes. Internal to deploy/serve/;
// StageWorker::Impl (serve_worker.cpp) states the worker's locking order.
#pragma once

#include <torch/nn/module.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deploy/early_exit/exit_network.h"
#include "deploy/serve/frame_decoder.h"
#include "deploy/serve/job_queue.h"
#include "deploy/serve/job_runner.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/wire.h"
#include "deploy/serve/worker_role.h"
#include "graph/summary_graph.h"

namespace igb::deploy {

class WorkerService final : public proto::Worker::Service {
 public:
  /// Every reference must outlive the service; `address` is the worker's bound address, set
  /// before the server starts.
  WorkerService(torch::nn::Module& model, const graph::SummaryGraph& graph,
                graph::SummaryGraph::Forward forward, const WorkerOptions& options,
                const std::string& address, JobQueue& jobs, FrameDecoder& decoder,
                JobRunner& runner);

  /// Makes the worker cascade unit `unit` of `net` (before the server starts).
  void set_cascade(const ExitNetwork& net, const CascadeUnit& unit);
  /// Drops the role and waits for the roles replaced before to go (the worker is shutting down,
  /// its server stopped).
  void drop_roles();

  grpc::Status Configure(grpc::ServerContext*, const proto::StageConfig* req,
                         proto::ConfigureReply* reply) override;
  grpc::Status Deliver(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override;
  grpc::Status Report(grpc::ServerContext*, const proto::ReportRequest* req,
                      proto::WorkerReport* reply) override;
  grpc::Status Probe(grpc::ServerContext*, const proto::ProbeRequest* req,
                     proto::ProbeReply* reply) override;
  grpc::Status Absorb(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override;

 private:
  std::shared_ptr<WorkerRole> role();
  /// Lets a replaced role go in the background: its sender may be waiting on a lost next worker
  /// until its timeout, which a new plan (a master planning around that worker) must not wait for.
  void retire(std::shared_ptr<WorkerRole> old);
  /// Queues `job` for the compute threads, waiting for room under --max-queue up to
  /// `timeout_ms` from `received`.
  grpc::Status enqueue(std::unique_ptr<Job> job, std::chrono::steady_clock::time_point received,
                       double timeout_ms, const std::string& what);

  torch::nn::Module& model_;
  const graph::SummaryGraph& graph_;
  graph::SummaryGraph::Forward forward_;
  const WorkerOptions& options_;
  const std::string& address_;
  JobQueue& jobs_;
  FrameDecoder& decoder_;
  JobRunner& runner_;
  std::string fingerprint_, weights_;
  std::map<std::string, int> value_ids_;

  std::mutex role_mutex_;
  std::shared_ptr<WorkerRole> role_;
  std::mutex retire_mutex_;
  std::vector<std::thread> retirers_;
  /// Measuring the ops' costs one request at a time.
  std::mutex measure_mutex_;
};

}  // namespace igb::deploy
