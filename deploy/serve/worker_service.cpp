#include "deploy/serve/worker_service.h"

#include <chrono>
#include <utility>

#include "core/error.h"
#include "core/host.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/partition/layer_costs.h"

namespace igb::deploy {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

}  // namespace

WorkerService::WorkerService(torch::nn::Module& model, const graph::SummaryGraph& graph,
                             graph::SummaryGraph::Forward forward, const WorkerOptions& options,
                             const std::string& address, JobQueue& jobs, FrameDecoder& decoder,
                             JobRunner& runner)
    : model_(model),
      graph_(graph),
      forward_(std::move(forward)),
      options_(options),
      address_(address),
      jobs_(jobs),
      decoder_(decoder),
      runner_(runner) {
  fingerprint_ = graph_fingerprint(graph_);
  weights_ = weights_digest(model_);
  for (size_t v = 0; v < graph_.values().size(); ++v)
    value_ids_[onnx_value_name(graph_, static_cast<int>(v))] = static_cast<int>(v);
}

std::shared_ptr<WorkerRole> WorkerService::role() {
  std::lock_guard<std::mutex> lock(role_mutex_);
  return role_;
}

void WorkerService::retire(std::shared_ptr<WorkerRole> old) {
  if (!old) return;
  std::lock_guard<std::mutex> lock(retire_mutex_);
  retirers_.emplace_back([old = std::move(old)]() mutable { old.reset(); });
}

void WorkerService::drop_roles() {
  std::shared_ptr<WorkerRole> old;
  {
    std::lock_guard<std::mutex> lock(role_mutex_);
    old = std::move(role_);
  }
  old.reset();
  std::lock_guard<std::mutex> lock(retire_mutex_);
  for (auto& t : retirers_) t.join();
  retirers_.clear();
}

void WorkerService::set_cascade(const ExitNetwork& net, const CascadeUnit& unit) {
  auto role =
      build_cascade_unit(graph_, net, unit, options_.int8,
                         [this](const std::string& next, const std::string& who,
                                TransferPrecision precision, bool diff, double timeout_ms) {
                           return runner_.make_sender(next, who, precision, diff, timeout_ms);
                         });
  warm_up(graph_, *role);
  std::lock_guard<std::mutex> lock(role_mutex_);
  role_ = std::move(role);
}

grpc::Status WorkerService::Configure(grpc::ServerContext*, const proto::StageConfig* req,
                                      proto::ConfigureReply* reply) {
  const auto start = Clock::now();
  if (const auto current = role(); current && current->cascade())
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "worker " + address_ + " is a cascade unit; it takes no plan");
  if (req->fingerprint() != fingerprint_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the plan is for a graph with fingerprint " + req->fingerprint() +
                            "; worker " + address_ + " holds " + graph_.model_name() +
                            " with fingerprint " + fingerprint_ +
                            " (another model, input size or pruning)");
  if (req->weights() != weights_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the master's " + graph_.model_name() + " has weights " + req->weights() +
                            "; worker " + address_ + " holds weights " + weights_ +
                            " (another checkpoint)");
  auto role = std::make_shared<WorkerRole>();
  role->kind = PipelineStageRole{req->plan(), req->diff(), req->next()};
  role->stage = req->stage();
  role->timeout_ms = req->timeout_ms() > 0 ? req->timeout_ms() : 10000;
  if (auto status = build_pipeline_stage(graph_, value_ids_, options_.int8, *req, *role);
      !status.ok())
    return status;
  try {
    warm_up(graph_, *role);
  } catch (const std::exception& e) {
    return refuse("stage " + std::to_string(req->stage()) + " does not run: " + error_line(e));
  }
  if (!req->next().empty())
    role->sender = runner_.make_sender(
        req->next(), "stage " + std::to_string(req->stage() + 1) + " (" + req->next() + ")",
        from_proto(req->precision()), req->diff(), role->timeout_ms);
  std::shared_ptr<WorkerRole> old;
  {
    std::lock_guard<std::mutex> lock(role_mutex_);
    old = std::move(role_);
    role_ = std::move(role);
  }
  retire(std::move(old));
  reply->set_model(graph_.model_name());
  reply->set_setup_ms(ms_since(start));
  return grpc::Status::OK;
}

grpc::Status WorkerService::Deliver(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) {
  const auto received = Clock::now();
  const std::shared_ptr<WorkerRole> role = this->role();
  if (jobs_.closed()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
  if (!role)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "worker " + address_ + " holds no stage yet (no plan was configured)");
  const std::string what = "frame " + std::to_string(frame->id());
  if (const auto* stage = role->pipeline(); stage && frame->plan() != stage->plan_number)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        what + " is for plan " + std::to_string(frame->plan()) + "; worker " +
                            address_ + " runs stage " + std::to_string(role->stage) + " of plan " +
                            std::to_string(stage->plan_number));
  if (frame->reply_to().empty()) return refuse(what + " names no reply_to address");
  std::map<std::string, const proto::Tensor*> by_name;
  for (const auto& t : frame->tensors()) {
    bool known = false;
    for (const auto& in : role->inputs) known = known || in.first == t.name();
    if (!known) {
      std::vector<std::string> names;
      for (const auto& in : role->inputs) names.push_back("'" + in.first + "'");
      return refuse(what + ": tensor '" + t.name() + "' is not an input of stage " +
                    std::to_string(role->stage) + " (it takes " + join(names) + ")");
    }
    if (!proto::Precision_IsValid(t.precision()))
      return refuse(what + ": tensor '" + t.name() + "' has precision " +
                    std::to_string(t.precision()) + " (0 fp32, 1 fp16, 2 int8)");
    if (!by_name.emplace(t.name(), &t).second)
      return refuse(what + ": tensor '" + t.name() + "' is sent twice");
  }
  auto job = std::make_unique<Job>();
  job->role = role;
  job->queued = received;
  *job->head.mutable_hops() = frame->hops();
  job->head.set_id(frame->id());
  job->head.set_plan(frame->plan());
  job->head.set_seq(frame->seq());
  job->head.set_reply_to(frame->reply_to());
  if (auto status = decoder_.decode(*frame, by_name, received, what, *role, *job); !status.ok())
    return status;
  return enqueue(std::move(job), received, role->timeout_ms, what);
}

grpc::Status WorkerService::enqueue(std::unique_ptr<Job> job, Clock::time_point received,
                                    double timeout_ms, const std::string& what) {
  size_t held = 0;
  if (!jobs_.push(std::move(job),
                  received + std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1000.0)),
                  &held))
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "worker " + address_ + " holds " + std::to_string(held) +
                            " frames (--max-queue) and had no room for " + what + " within " +
                            std::to_string(static_cast<int64_t>(timeout_ms)) + " ms");
  return grpc::Status::OK;
}

grpc::Status WorkerService::Report(grpc::ServerContext*, const proto::ReportRequest* req,
                                   proto::WorkerReport* reply) {
  const std::shared_ptr<WorkerRole> role = this->role();
  const JobRunner::Counts counts = runner_.counts();
  reply->set_frames(counts.frames);
  reply->set_errors(counts.errors);
  reply->set_compute_ms(counts.compute_ms);
  reply->set_worker(address_);
  reply->set_model(graph_.model_name());
  reply->set_fingerprint(fingerprint_);
  reply->set_machine(this_machine());
  // A worker emulating a slower machine sleeps through most of its stage: it stands for a
  // machine of its own, not for a share of this one's cores.
  reply->set_host(options_.compute_speed < 1 ? host_identity() + " emulated at " + address_
                                             : host_identity());
  reply->set_cores(usable_cores());
  reply->set_cpu_ms(process_cpu_ms());
  for (int64_t d : graph_.input_shape()) reply->add_input_shape(d);
  reply->set_input_name(onnx_value_name(graph_, graph_.inputs().at(0)));
  if (role) {
    const PipelineStageRole* stage = role->pipeline();
    reply->set_cascade(role->cascade() != nullptr);
    reply->set_plan(stage ? stage->plan_number : 0);
    reply->set_stage(role->stage);
    if (role->sender) {
      reply->set_bytes_sent(role->sender->bytes_sent());
      reply->set_send_ms(role->sender->send_ms());
    }
  }
  if (req->measure_costs()) {
    try {
      std::lock_guard<std::mutex> lock(measure_mutex_);
      const auto costs = measure_layer_costs(model_, graph_, forward_, 5, true, options_.int8);
      for (const auto& [op, ms] : costs.ms) {
        auto* c = reply->add_costs();
        c->set_op(op);
        c->set_ms(ms / options_.compute_speed);
      }
    } catch (const std::exception& e) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "measuring the ops failed: " + error_line(e));
    }
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Probe(grpc::ServerContext*, const proto::ProbeRequest* req,
                                  proto::ProbeReply* reply) {
  const std::shared_ptr<WorkerRole> role = this->role();
  if (req->messages() < 1 || req->messages() > 1000 || req->values_size() > 8)
    return refuse("a probe takes 1 to 1000 messages of at most 8 sizes");
  // At most what the master sends (1 MB a message): a probe is a measurement, not a load.
  for (int64_t n : req->values())
    if (n < 1 || n > (int64_t{1} << 18)) return refuse("a probe's tensor holds 1 to 262144 values");
  const PipelineStageRole* stage = role ? role->pipeline() : nullptr;
  const std::string target =
      req->collector().empty() ? (stage ? stage->next : "") : req->collector();
  if (target.empty()) return refuse("worker " + address_ + " has no next worker to probe");
  // The connections frames and results go over: the probes time them and leave them open.
  const auto channel = req->collector().empty() && role && role->sender
                           ? role->sender->channel()
                           : runner_.collector_channel(target);
  const auto who = req->collector().empty() ? "worker " + target : "master " + target;
  std::unique_ptr<proto::Worker::Stub> worker;
  std::unique_ptr<proto::Collector::Stub> collector;
  if (req->collector().empty())
    worker = proto::Worker::NewStub(channel);
  else
    collector = proto::Collector::NewStub(channel);
  const auto call = [&](const proto::Frame& f, std::string* error) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(role ? role->timeout_ms : 10000));
    ctx.set_wait_for_ready(true);
    proto::Ack ack;
    const auto status = worker ? worker->Absorb(&ctx, f, &ack) : collector->Absorb(&ctx, f, &ack);
    if (!status.ok()) *error = call_failure(status, *channel, who, role ? role->timeout_ms : 10000);
    return status;
  };
  try {
    for (double ms :
         time_probes(call, req->messages(), {req->values().begin(), req->values().end()},
                     from_proto(req->precision()), req->diff()))
      reply->add_ms(ms);
  } catch (const std::runtime_error& e) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, e.what());
  }
  return grpc::Status::OK;
}

grpc::Status WorkerService::Absorb(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) {
  return absorb_probe(*frame);
}

}  // namespace igb::deploy
