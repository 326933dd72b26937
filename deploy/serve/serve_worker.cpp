#include "deploy/serve/serve_worker.h"

#include <c10/util/Exception.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/host.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/stages.h"
#include "deploy/serve/link_sender.h"
#include "deploy/serve/wire.h"

namespace igb::deploy {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// CPU time of the calling thread, ms.
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "a scalar" : out;
}

/// The first line of an error, without LibTorch's "[file:line]" location.
std::string error_line(const std::exception& e) {
  std::string s = e.what();
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) s = c10->what_without_backtrace();
  if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
  return s;
}

grpc::Status refuse(const std::string& what) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what);
}

}  // namespace

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

/// What a worker runs now, its role: one stage of a master's plan (the plan numbered
/// `plan_number`), or a unit of a cascade. Frames hold the role they were accepted under, so a new
/// plan does not disturb frames in flight.
struct WorkerRole {
  uint32_t plan_number = 0;
  int stage = 0;
  std::unique_ptr<StageRunner> runner;
  /// Values received and values passed on (or answered with, on the last stage), by name.
  std::vector<std::pair<std::string, int>> inputs, outputs;
  bool diff = false;
  double timeout_ms = 10000;
  std::unique_ptr<LinkSender> sender;
  /// The next worker's address ("" on the last stage).
  std::string next;
  /// A cascade unit's exit (null: a pipeline stage, or the cascade's final segment).
  torch::nn::Sequential head{nullptr};
  int exit_value = -1;
  bool cascade = false;
  ExitCriterion criterion = ExitCriterion::kMaxSoftmax;
  double score_threshold = 0;
  /// The receiving side of --mode diff: the tensor each input name holds, and the last seq taken.
  std::map<std::string, DiffDecoder> decoders;
  int64_t last_seq = -1;
};

class StageWorker::Impl final : public proto::Worker::Service {
 public:
  Impl(torch::nn::Module& model, const graph::SummaryGraph& graph,
       graph::SummaryGraph::Forward forward, WorkerOptions options)
      : model_(model), graph_(graph), forward_(std::move(forward)), options_(std::move(options)) {
    if (!(options_.compute_speed > 0 && options_.compute_speed <= 1))
      throw InputError(
          "--compute-speed must be in (0, 1]: a worker can emulate a slower machine, "
          "not a faster one");
    if (options_.compute_threads < 1 || options_.compute_threads > 64)
      throw InputError("--compute-threads must be between 1 and 64, not " +
                       std::to_string(options_.compute_threads));
    fingerprint_ = graph_fingerprint(graph_);
    weights_ = weights_digest(model_);
    for (size_t v = 0; v < graph_.values().size(); ++v)
      value_ids_[onnx_value_name(graph_, static_cast<int>(v))] = static_cast<int>(v);
  }

  ~Impl() override { shutdown(); }

  std::string start() {
    silence_grpc_log();
    server_ = start_server(options_.listen, this, "--listen", &address_);
    for (int i = 0; i < options_.compute_threads; ++i)
      compute_.emplace_back([this] { compute_loop(); });
    return address_;
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    stopped_.wait(lock, [&] { return stop_; });
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_ && compute_.empty()) return;
      stop_ = true;
    }
    queue_changed_.notify_all();
    stopped_.notify_all();
    queue_space_.notify_all();
    {
      std::lock_guard<std::mutex> lock(decode_mutex_);
      stopping_ = true;
    }
    decoded_.notify_all();
    for (auto& t : compute_) t.join();
    compute_.clear();
    if (server_) server_->Shutdown(deadline_in(1000));
    std::shared_ptr<WorkerRole> old;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      old = std::move(role_);
    }
    old.reset();
    std::lock_guard<std::mutex> lock(retire_mutex_);
    for (auto& t : retirers_) t.join();
    retirers_.clear();
  }

  /// Lets a replaced role go in the background: its sender may be waiting on a lost next worker
  /// until its timeout, which a new plan (a master planning around that worker) must not wait for.
  void retire(std::shared_ptr<WorkerRole> old) {
    if (!old) return;
    std::lock_guard<std::mutex> lock(retire_mutex_);
    retirers_.emplace_back([old = std::move(old)]() mutable { old.reset(); });
  }

  void set_cascade(const ExitNetwork& net, const CascadeUnit& unit) {
    const int units = static_cast<int>(net.exits());
    if (unit.unit < 0 || unit.unit >= units)
      throw InputError("--unit " + std::to_string(unit.unit) + ": " + graph_.model_name() +
                       " has " + std::to_string(units) + " segments (units 0 to " +
                       std::to_string(units - 1) + ")");
    const bool last = unit.unit == units - 1;
    if (!last && unit.next.empty())
      throw InputError("--unit " + std::to_string(unit.unit) +
                       " is not the last segment: give --next, the address of unit " +
                       std::to_string(unit.unit + 1));
    const auto& segments = net.segments();
    auto role = std::make_shared<WorkerRole>();
    role->cascade = true;
    role->stage = unit.unit;
    role->runner = std::make_unique<StageRunner>(graph_, segments[unit.unit], /*inference=*/true,
                                                 options_.int8);
    role->timeout_ms = unit.timeout_ms;
    role->criterion = unit.criterion;
    role->score_threshold = unit.score_threshold;
    for (int v : segments[unit.unit].inputs)
      role->inputs.emplace_back(onnx_value_name(graph_, v), v);
    if (!last) {
      role->head = net.head(unit.unit);
      role->exit_value = net.exit_values().at(unit.unit);
      // Everything a later segment reads that is known here: made by this segment or before.
      std::set<int> known;
      for (int e = 0; e <= unit.unit; ++e) {
        known.insert(segments[e].inputs.begin(), segments[e].inputs.end());
        known.insert(segments[e].outputs.begin(), segments[e].outputs.end());
      }
      std::set<int> later;
      for (int e = unit.unit + 1; e < units; ++e)
        for (int v : segments[e].inputs)
          if (known.count(v)) later.insert(v);
      for (int v : later) role->outputs.emplace_back(onnx_value_name(graph_, v), v);
      role->sender = make_sender(unit.next, "unit " + std::to_string(unit.unit + 1), unit.precision,
                                 false, unit.timeout_ms);
    } else {
      for (int v : graph_.outputs()) role->outputs.emplace_back(onnx_value_name(graph_, v), v);
    }
    warm_up(*role);
    std::lock_guard<std::mutex> lock(mutex_);
    role_ = std::move(role);
  }

  // ---- the RPCs ----

  grpc::Status Configure(grpc::ServerContext*, const proto::StageConfig* req,
                         proto::ConfigureReply* reply) override {
    const auto start = Clock::now();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (role_ && role_->cascade)
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "worker " + address_ + " is a cascade unit; it takes no plan");
    }
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
    role->plan_number = req->plan();
    role->stage = req->stage();
    role->diff = req->diff();
    role->timeout_ms = req->timeout_ms() > 0 ? req->timeout_ms() : 10000;
    if (auto status = build_stage(*req, *role); !status.ok()) return status;
    try {
      warm_up(*role);
    } catch (const std::exception& e) {
      return refuse("stage " + std::to_string(req->stage()) + " does not run: " + error_line(e));
    }
    role->next = req->next();
    if (!req->next().empty())
      role->sender = make_sender(
          req->next(), "stage " + std::to_string(req->stage() + 1) + " (" + req->next() + ")",
          from_proto(req->precision()), req->diff(), role->timeout_ms);
    std::shared_ptr<WorkerRole> old;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      old = std::move(role_);
      role_ = std::move(role);
    }
    retire(std::move(old));
    reply->set_model(graph_.model_name());
    reply->set_setup_ms(ms_since(start));
    return grpc::Status::OK;
  }

  grpc::Status Deliver(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override {
    const auto received = Clock::now();
    std::shared_ptr<WorkerRole> role;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      role = role_;
      if (stop_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "shutting down");
    }
    if (!role)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "worker " + address_ + " holds no stage yet (no plan was configured)");
    const std::string what = "frame " + std::to_string(frame->id());
    if (!role->cascade && frame->plan() != role->plan_number)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          what + " is for plan " + std::to_string(frame->plan()) + "; worker " +
                              address_ + " runs stage " + std::to_string(role->stage) +
                              " of plan " + std::to_string(role->plan_number));
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
    if (auto status = decode(*frame, by_name, received, what, *role, *job); !status.ok())
      return status;
    return enqueue(std::move(job), received, role->timeout_ms, what);
  }

  grpc::Status Report(grpc::ServerContext*, const proto::ReportRequest* req,
                      proto::WorkerReport* reply) override {
    std::shared_ptr<WorkerRole> role;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      role = role_;
      reply->set_frames(frames_);
      reply->set_errors(errors_);
      reply->set_compute_ms(compute_ms_);
    }
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
      reply->set_cascade(role->cascade);
      reply->set_plan(role->plan_number);
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

  grpc::Status Probe(grpc::ServerContext*, const proto::ProbeRequest* req,
                     proto::ProbeReply* reply) override {
    std::shared_ptr<WorkerRole> role;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      role = role_;
    }
    if (req->messages() < 1 || req->messages() > 1000 || req->values_size() > 8)
      return refuse("a probe takes 1 to 1000 messages of at most 8 sizes");
    // At most what the master sends (1 MB a message): a probe is a measurement, not a load.
    for (int64_t n : req->values())
      if (n < 1 || n > (int64_t{1} << 18))
        return refuse("a probe's tensor holds 1 to 262144 values");
    const std::string target =
        req->collector().empty() ? (role ? role->next : "") : req->collector();
    if (target.empty()) return refuse("worker " + address_ + " has no next worker to probe");
    // The connections frames and results go over: the probes time them and leave them open.
    const auto channel = req->collector().empty() && role && role->sender
                             ? role->sender->channel()
                             : collector_channel(target);
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
      if (!status.ok())
        *error = call_failure(status, *channel, who, role ? role->timeout_ms : 10000);
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

  grpc::Status Absorb(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override {
    return absorb_probe(*frame);
  }

 private:
  struct Job {
    std::shared_ptr<WorkerRole> role;
    proto::Frame head;
    std::map<int, at::Tensor> values;
    Clock::time_point queued;
    int64_t bytes_in = 0;
  };

  /// Decodes `frame`'s tensors (`by_name`) into `job` with the role's decoders, taking a
  /// stream's differences in order: a frame ahead of the next waits for the frames before it.
  grpc::Status decode(const proto::Frame& frame,
                      const std::map<std::string, const proto::Tensor*>& by_name,
                      Clock::time_point received, const std::string& what, WorkerRole& role,
                      Job& job) {
    try {
      std::unique_lock<std::mutex> lock(decode_mutex_);
      bool differences = false;
      for (const auto& [name, t] : by_name) differences = differences || t->difference();
      if (differences && frame.seq() > role.last_seq + 1) {
        // The frame before may still be on its way (a sender has several calls out, and a
        // later one can overtake it): wait for it, up to half the timeout the sender's call has.
        const auto until =
            received + std::chrono::microseconds(static_cast<int64_t>(role.timeout_ms * 500.0));
        decoded_.wait_until(lock, until,
                            [&] { return stopping_ || frame.seq() <= role.last_seq + 1; });
      }
      if (differences && frame.seq() != role.last_seq + 1)
        return refuse(what + " holds differences from seq " + std::to_string(frame.seq() - 1) +
                      ", but the last frame this worker took is seq " +
                      std::to_string(role.last_seq));
      // Decode into copies: a frame refused half way leaves what the worker holds unchanged.
      auto decoders = role.decoders;
      for (const auto& [name, id] : role.inputs) {
        auto it = by_name.find(name);
        if (it == by_name.end()) return refuse(what + " lacks input '" + name + "'");
        const EncodedTensor e = from_proto(*it->second);
        const std::string tensor_what = what + " tensor '" + name + "'";
        at::Tensor x = role.diff || e.difference ? decoders[name].decode(e, tensor_what)
                                                 : decode_tensor(e, tensor_what);
        if (x.sizes().vec() != graph_.shape(id))
          return refuse(tensor_what + " is " + shape_text(x.sizes().vec()) + "; stage " +
                        std::to_string(role.stage) + " takes " + shape_text(graph_.shape(id)));
        job.bytes_in += static_cast<int64_t>(e.payload.size());
        // The decoder keeps the tensor as the base of the next difference; the stage may change
        // its inputs in place (a traced ReLU_), so it gets a copy.
        job.values[id] = role.diff || e.difference ? x.clone() : std::move(x);
      }
      role.decoders = std::move(decoders);
      role.last_seq = frame.seq();
      decoded_.notify_all();
    } catch (const InputError& e) {
      return refuse(e.what());
    }
    return grpc::Status::OK;
  }

  /// Queues `job` for the compute threads, waiting for room under --max-queue up to
  /// `timeout_ms` from `received`.
  grpc::Status enqueue(std::unique_ptr<Job> job, Clock::time_point received, double timeout_ms,
                       const std::string& what) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      const auto room = [&] {
        return stop_ || options_.max_queue <= 0 ||
               queue_.size() < static_cast<size_t>(options_.max_queue);
      };
      if (!queue_space_.wait_until(
              lock, received + std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1000.0)),
              room))
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "worker " + address_ + " holds " + std::to_string(queue_.size()) +
                                " frames (--max-queue) and had no room for " + what + " within " +
                                std::to_string(static_cast<int64_t>(timeout_ms)) + " ms");
      queue_.push_back(std::move(job));
    }
    queue_changed_.notify_one();
    return grpc::Status::OK;
  }

  /// The stage of a master's plan: its ops, the values it receives and passes on, checked
  /// against the graph, and its runner.
  grpc::Status build_stage(const proto::StageConfig& req, WorkerRole& role) const {
    Stage stage;
    stage.index = req.stage();
    stage.device = req.stage();
    stage.device_name = "stage " + std::to_string(req.stage());
    std::set<int> made;
    for (const auto& name : req.ops()) {
      const int op = graph_.find(name);
      if (op < 0) return refuse("op '" + name + "' is not in " + graph_.model_name());
      stage.ops.push_back(op);
      for (int v : graph_.op(op).outputs) made.insert(v);
    }
    std::sort(stage.ops.begin(), stage.ops.end());
    std::set<int> given;
    std::string bad;
    auto value = [&](const std::string& name, std::vector<std::pair<std::string, int>>* into) {
      auto it = value_ids_.find(name);
      if (it == value_ids_.end()) {
        bad = "value '" + name + "' is not in " + graph_.model_name();
        return;
      }
      const std::string& dtype = graph_.values().at(it->second).dtype;
      if (!dtype.empty() && dtype != "Float") {
        bad = "value '" + name + "' is " + dtype + ": only float tensors cross a link";
        return;
      }
      into->emplace_back(name, it->second);
    };
    for (const auto& name : req.inputs()) value(name, &role.inputs);
    for (const auto& name : req.outputs()) value(name, &role.outputs);
    if (!bad.empty()) return refuse(bad);
    for (const auto& [name, id] : role.inputs) {
      given.insert(id);
      stage.inputs.push_back(id);
    }
    for (int op : stage.ops)
      for (int v : graph_.op(op).inputs)
        if (!given.count(v) && !made.count(v))
          return refuse("stage " + std::to_string(req.stage()) + ": op '" + graph_.op(op).name +
                        "' reads '" + onnx_value_name(graph_, v) +
                        "', which the stage neither receives nor makes");
    for (const auto& [name, id] : role.outputs) {
      if (!given.count(id) && !made.count(id))
        return refuse("stage " + std::to_string(req.stage()) + " passes on '" + name +
                      "', which it neither receives nor makes");
      if (made.count(id)) stage.outputs.push_back(id);
    }
    try {
      role.runner = std::make_unique<StageRunner>(graph_, stage, /*inference=*/true, options_.int8);
    } catch (const std::exception& e) {
      return refuse(error_line(e));
    }
    return grpc::Status::OK;
  }

  /// Runs a new plan's stage (and exit head) once on zeros: the first frame does not pay for
  /// LibTorch's first-run work (kernel choice, workspace allocation), which the simulator's
  /// per-op costs exclude too (they are timed after warm-up runs).
  void warm_up(WorkerRole& role) const {
    torch::NoGradGuard no_grad;
    std::map<int, at::Tensor> values;
    for (const auto& [name, id] : role.inputs) values[id] = torch::zeros(graph_.shape(id));
    role.runner->run(values);
    if (role.head) role.head->forward(values.at(role.exit_value));
  }

  std::unique_ptr<LinkSender> make_sender(const std::string& next, const std::string& who,
                                          TransferPrecision precision, bool diff,
                                          double timeout_ms) {
    auto sender = std::make_unique<LinkSender>(
        next, who, options_.link, precision, diff, timeout_ms,
        [this, who, next](const proto::Frame& frame, const std::string& error) {
          // A cascade unit answers from its own exit instead, and does so for the next frames
          // too while the next unit stays lost.
          if (auto kept = take_fallback(frame.id())) {
            kept->set_fallback("unit " + std::to_string(kept->answered_by() + 1) + " (" + next +
                               ") is lost: " + error);
            {
              std::lock_guard<std::mutex> lock(mutex_);
              next_lost_until_ = Clock::now() + std::chrono::seconds(5);
              next_lost_why_ = kept->fallback();
            }
            answer(frame.reply_to(), *kept);
            return;
          }
          proto::Result r;
          r.set_id(frame.id());
          r.set_error("worker " + address_ + " could not pass frame " + std::to_string(frame.id()) +
                      " on: " + error);
          answer(frame.reply_to(), r);
        });
    sender->set_capacity(options_.max_queue);
    return sender;
  }

  /// A cascade unit's own answer to a frame it passed on, kept until the next unit is known to
  /// have it: the last kMaxFallbacks frames.
  static constexpr size_t kMaxFallbacks = 4096;
  void keep_fallback(proto::Result r) {
    std::lock_guard<std::mutex> lock(mutex_);
    fallback_order_.push_back(r.id());
    fallbacks_[r.id()] = std::move(r);
    while (fallback_order_.size() > kMaxFallbacks) {
      fallbacks_.erase(fallback_order_.front());
      fallback_order_.pop_front();
    }
  }
  std::optional<proto::Result> take_fallback(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = fallbacks_.find(id);
    if (it == fallbacks_.end()) return std::nullopt;
    auto r = std::move(it->second);
    fallbacks_.erase(it);
    return r;
  }
  /// Why a cascade unit answers from its own exit now (the next unit was lost within 5 s), or "".
  std::string next_lost() {
    std::lock_guard<std::mutex> lock(mutex_);
    return Clock::now() < next_lost_until_ ? next_lost_why_ : std::string();
  }

  /// The connection to a master's (or client's) Collector at `address`, one per address.
  std::shared_ptr<grpc::Channel> collector_channel(const std::string& address) {
    std::lock_guard<std::mutex> lock(collectors_mutex_);
    auto& c = collectors_[address];
    if (!c) c = open_channel(address);
    return c;
  }

  /// Sends a result to `reply_to`; a reply_to that does not answer loses it (the master's
  /// timeout reports the frame).
  void answer(const std::string& reply_to, const proto::Result& result) {
    const auto stub = proto::Collector::NewStub(collector_channel(reply_to));
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(10000));
    proto::Ack ack;
    (void)stub->Collect(&ctx, result, &ack);
  }

  void compute_loop() {
    for (;;) {
      std::unique_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        queue_changed_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      queue_space_.notify_one();
      run_job(*job);
    }
  }

  void run_job(Job& job) {
    WorkerRole& role = *job.role;
    const auto start = Clock::now();
    const double cpu_start = thread_cpu_ms();
    proto::Hop hop;
    hop.set_stage(role.stage);
    hop.set_worker(address_);
    hop.set_queue_ms(std::chrono::duration<double, std::milli>(start - job.queued).count());
    hop.set_bytes_in(job.bytes_in);
    bool answers = role.sender == nullptr;
    at::Tensor logits;
    try {
      torch::NoGradGuard no_grad;
      role.runner->run(job.values);
      if (role.head) {
        logits = role.head->forward(job.values.at(role.exit_value));
        const double score = exit_scores(logits, role.criterion).item<double>();
        hop.set_score(score);
        if (score >= role.score_threshold) {
          answers = true;
          job.values.clear();
          job.values[-1] = logits;
        }
      }
    } catch (const std::exception& e) {
      fail_job(job, e);
      return;
    }
    hop.set_compute_cpu_ms(thread_cpu_ms() - cpu_start);
    if (options_.compute_speed < 1) {
      // The emulated machine is slower: it would still be busy with the frame.
      const double ran = ms_since(start);
      std::this_thread::sleep_for(std::chrono::microseconds(
          static_cast<int64_t>(ran * (1.0 / options_.compute_speed - 1.0) * 1000.0)));
    }
    hop.set_compute_ms(ms_since(start));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++frames_;
      compute_ms_ += hop.compute_ms();
    }
    std::string fallback;
    if (!answers && logits.defined() && !(fallback = next_lost()).empty()) {
      answers = true;
      job.values.clear();
      job.values[-1] = logits;
    }
    if (!answers) {
      if (logits.defined()) keep_fallback(own_answer(job.head, hop, role.stage, logits));
      OutgoingFrame out;
      out.frame = std::move(job.head);
      *out.frame.add_hops() = hop;
      for (const auto& [name, id] : role.outputs) out.tensors.emplace_back(name, job.values.at(id));
      role.sender->send(std::move(out));
      return;
    }
    if (role.sender) role.sender->skip(job.head.seq());
    answer_job(job, hop, fallback);
  }

  /// Answers `job` with the error `e` its stage raised.
  void fail_job(Job& job, const std::exception& e) {
    const WorkerRole& role = *job.role;
    proto::Result r;
    r.set_id(job.head.id());
    r.set_error("stage " + std::to_string(role.stage) + " on worker " + address_ +
                " failed on frame " + std::to_string(job.head.id()) + ": " + error_line(e));
    if (role.sender) role.sender->skip(job.head.seq());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++errors_;
    }
    answer(job.head.reply_to(), r);
  }

  /// Answers `job` with its outputs (the exit's logits when it has them).
  void answer_job(Job& job, const proto::Hop& hop, const std::string& fallback) {
    const WorkerRole& role = *job.role;
    proto::Result r;
    r.set_id(job.head.id());
    *r.mutable_hops() = job.head.hops();
    *r.add_hops() = hop;
    r.set_answered_by(role.stage);
    r.set_score(hop.score());
    r.set_fallback(fallback);
    if (job.values.count(-1)) {
      to_proto(encode_tensor(job.values[-1], TransferPrecision::kFp32), "output", r.add_outputs());
    } else {
      for (const auto& [name, id] : role.outputs)
        to_proto(encode_tensor(job.values.at(id), TransferPrecision::kFp32), name, r.add_outputs());
    }
    for (const auto& t : r.outputs())
      r.mutable_hops()->rbegin()->set_bytes_out(r.hops().rbegin()->bytes_out() +
                                                static_cast<int64_t>(t.payload().size()));
    answer(job.head.reply_to(), r);
  }

  /// A cascade unit's answer to `head` from its own exit's `logits`.
  static proto::Result own_answer(const proto::Frame& head, const proto::Hop& hop, int stage,
                                  const at::Tensor& logits) {
    proto::Result r;
    r.set_id(head.id());
    *r.mutable_hops() = head.hops();
    *r.add_hops() = hop;
    r.set_answered_by(stage);
    r.set_score(hop.score());
    to_proto(encode_tensor(logits, TransferPrecision::kFp32), "output", r.add_outputs());
    return r;
  }

  torch::nn::Module& model_;
  const graph::SummaryGraph& graph_;
  graph::SummaryGraph::Forward forward_;
  WorkerOptions options_;
  std::string fingerprint_, weights_;
  std::map<std::string, int> value_ids_;
  std::string address_;
  std::unique_ptr<grpc::Server> server_;

  std::mutex mutex_;
  std::condition_variable queue_changed_, stopped_, queue_space_;
  bool stop_ = false;
  std::shared_ptr<WorkerRole> role_;
  std::deque<std::unique_ptr<Job>> queue_;
  std::vector<std::thread> compute_;
  int64_t frames_ = 0, errors_ = 0;
  std::mutex retire_mutex_;
  std::vector<std::thread> retirers_;
  std::map<uint64_t, proto::Result> fallbacks_;
  std::deque<uint64_t> fallback_order_;
  Clock::time_point next_lost_until_;
  std::string next_lost_why_;
  double compute_ms_ = 0;

  std::mutex decode_mutex_, measure_mutex_, collectors_mutex_;
  /// A frame was decoded (a role's last_seq moved), or the worker is shutting down.
  std::condition_variable decoded_;
  std::atomic<bool> stopping_{false};
  std::map<std::string, std::shared_ptr<grpc::Channel>> collectors_;
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
