#include "deploy/serve/serve_worker.h"

#include <cstdio>
#include <thread>
#include <vector>

#include "core/crc32c.h"
#include "core/error.h"
#include "deploy/serve/frame_decoder.h"
#include "deploy/serve/job_queue.h"
#include "deploy/serve/job_runner.h"
#include "deploy/serve/wire.h"
#include "deploy/serve/worker_service.h"

namespace igb::deploy {

std::string weights_digest(torch::nn::Module& model) {
  uint32_t crc = 0;
  auto add = [&](const std::string& name, const at::Tensor& t) {
    crc = crc32c(name.data(), name.size(), crc);
    const at::Tensor c = t.detach().to(at::kCPU).contiguous();
    crc = crc32c(c.data_ptr(), static_cast<size_t>(c.nbytes()), crc);
  };
  for (const auto& p : model.named_parameters()) add(p.key(), p.value());
  for (const auto& b : model.named_buffers()) add(b.key(), b.value());
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", crc);
  return text;
}

namespace {

/// `options`, refused before the worker computes anything when out of range.
WorkerOptions checked(WorkerOptions options) {
  if (!(options.compute_speed > 0 && options.compute_speed <= 1))
    throw InputError(
        "--compute-speed must be in (0, 1]: a worker can emulate a slower machine, "
        "not a faster one");
  if (options.compute_threads < 1 || options.compute_threads > 64)
    throw InputError("--compute-threads must be between 1 and 64, not " +
                     std::to_string(options.compute_threads));
  return options;
}

}  // namespace

/// A worker's parts, wired together: the RPC surface fills the job queue (through the decoder),
/// the compute threads empty it with the runner.
class StageWorker::Impl {
 public:
  Impl(torch::nn::Module& model, const graph::SummaryGraph& graph,
       graph::SummaryGraph::Forward forward, WorkerOptions options)
      : options_(checked(std::move(options))),
        runner_(options_, address_),
        decoder_(graph),
        jobs_(options_.max_queue),
        service_(model, graph, std::move(forward), options_, address_, jobs_, decoder_, runner_) {}

  ~Impl() { shutdown(); }

  void set_cascade(const ExitNetwork& net, const CascadeUnit& unit) {
    service_.set_cascade(net, unit);
  }

  std::string start() {
    silence_grpc_log();
    server_ = start_server(options_.listen, &service_, "--listen", &address_);
    for (int i = 0; i < options_.compute_threads; ++i)
      compute_.emplace_back([this] {
        while (auto job = jobs_.pop()) runner_.run(*job);
      });
    return address_;
  }

  void wait() { jobs_.wait_closed(); }

  void shutdown() {
    if (jobs_.close() && compute_.empty()) return;
    decoder_.stop();
    for (auto& t : compute_) t.join();
    compute_.clear();
    if (server_) server_->Shutdown(deadline_in(1000));
    service_.drop_roles();
  }

 private:
  // Declared so that what a role's sender calls back into (the runner: its fallback cache,
  // counts and collector channels) outlives every role, in the queue's jobs or the service, and
  // the server goes before its service.
  //
  // Locking order: the service's retire lock first, then any other. Every other lock (the
  // queue's, the decoder's, the fallback cache's, the runner's counts and collector channels, the
  // service's role and cost measuring) is a leaf: no code takes another while holding it. The
  // retire lock comes first because shutdown holds it while joining threads that destroy old
  // roles, whose senders' failure callbacks take the fallback cache's and the runner's locks. A
  // LinkSender never holds its own lock while it calls back into the worker.
  const WorkerOptions options_;
  std::string address_;
  JobRunner runner_;
  FrameDecoder decoder_;
  JobQueue jobs_;
  WorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> compute_;
};

StageWorker::StageWorker(torch::nn::Module& model, const graph::SummaryGraph& graph,
                         graph::SummaryGraph::Forward forward, WorkerOptions options)
    : impl_(std::make_unique<Impl>(model, graph, std::move(forward), std::move(options))) {}

StageWorker::~StageWorker() = default;

void StageWorker::set_cascade(const ExitNetwork& net, const CascadeUnit& unit) {
  impl_->set_cascade(net, unit);
}

std::string StageWorker::start() { return impl_->start(); }
void StageWorker::wait() { impl_->wait(); }
void StageWorker::shutdown() { impl_->shutdown(); }

}  // namespace igb::deploy
