#include "deploy/serve/serve_master.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/error.h"
#include "core/host.h"
#include "deploy/onnx/onnx_export.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/serve/link_sender.h"
#include "deploy/serve/master_reports.h"
#include "deploy/serve/wire.h"

namespace igb::deploy {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

std::vector<std::vector<int>> stage_links(const graph::SummaryGraph& graph,
                                          const std::vector<Stage>& stages) {
  const int k = static_cast<int>(stages.size());
  // Stage making each value (-1: a graph input, known from the start) and the last stage reading
  // it (k for a model output: it goes with the answer).
  std::map<int, int> made, last_read;
  for (int v : graph.inputs()) made[v] = -1;
  for (int s = 0; s < k; ++s)
    for (int op : stages[s].ops) {
      for (int v : graph.op(op).outputs) made[v] = s;
      for (int v : graph.op(op).inputs) last_read[v] = std::max(last_read[v], s);
    }
  for (int v : graph.outputs()) last_read[v] = k;
  std::vector<std::vector<int>> links(k);
  for (const auto& [v, reader] : last_read) {
    auto it = made.find(v);
    if (it == made.end()) continue;
    for (int l = std::max(it->second, 0); l < k; ++l)
      if (reader > l) links[l].push_back(v);
  }
  return links;
}

class ServeMaster::Impl final : public proto::Collector::Service {
 public:
  Impl(const graph::SummaryGraph* graph, MasterOptions options)
      : graph_(graph), options_(std::move(options)) {
    if (options_.workers.empty()) throw InputError("--workers: give one address per stage");
    if (!(options_.timeout_ms > 0)) throw InputError("--timeout must be positive");
    silence_grpc_log();
    server_ = start_server(options_.listen, this, "--listen", &address_);
    reply_to_ = options_.advertise.empty() ? address_ : options_.advertise;
    for (const auto& w : options_.workers) {
      chain_.push_back(static_cast<int>(channels_.size()));
      channels_.push_back(open_channel(w));
      stubs_.push_back(proto::Worker::NewStub(channels_.back()));
    }
  }

  ~Impl() override {
    sender_.reset();
    if (server_) server_->Shutdown(deadline_in(1000));
  }

  grpc::Status Collect(grpc::ServerContext*, const proto::Result* result, proto::Ack*) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      results_[result->id()] = *result;
    }
    arrived_.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status Absorb(grpc::ServerContext*, const proto::Frame* frame, proto::Ack*) override {
    return absorb_probe(*frame);
  }

  std::vector<HopCost> probe_hops(int messages) {
    std::vector<HopCost> out;
    for (size_t hop = 0; hop <= chain_.size(); ++hop) {
      // One value, and 256 Ki values (1 MB in float32) where 16 Ki values (64 kB) take under
      // 20 ms, those otherwise: the per-message time and a megabyte's, on messages the size of a
      // frame's where the link is fast (they also leave its connection's flow-control windows
      // grown for them), and in seconds where it is slow.
      const int64_t small = int64_t{1} << 14;
      const std::vector<int64_t> sizes = {1, probe(hop, 1, small) < 20 ? small << 4 : small};
      const double mb = 4.0 * static_cast<double>(sizes[1] - sizes[0]) / 1e6;
      HopCost h;
      h.from = hop == 0 ? "master" : who(hop - 1);
      h.to = hop == chain_.size() ? "master" : who(hop);
      double ms[2], cpu[2];
      for (size_t k = 0; k < 2; ++k) {
        // Both ends' CPU over the probes: nothing else runs on a chain being configured.
        const double before = cpu_at(hop) + cpu_at(hop + 1);
        ms[k] = probe(hop, messages, sizes[k]);
        cpu[k] = (cpu_at(hop) + cpu_at(hop + 1) - before) / (messages + 2);
      }
      h.message_ms = ms[0];
      h.ms_per_mb = std::max(0.0, ms[1] - ms[0]) / mb;
      h.cpu_ms = cpu[0];
      h.cpu_ms_per_mb = std::max(0.0, cpu[1] - cpu[0]) / mb;
      out.push_back(h);
    }
    return out;
  }

  ServingCosts measure_serving(const std::vector<at::Tensor>& frames) {
    ServingCosts out;
    out.frames = static_cast<int>(frames.size());
    out.one_at_a_time = serve_way(frames, 1);
    out.back_to_back = serve_way(frames, 0);
    return out;
  }

  /// Serves `frames` back to back, at most `max_in_flight` on their way (0: no limit), and
  /// measures each process's CPU over them.
  ServingCosts::Way serve_way(const std::vector<at::Tensor>& frames, int max_in_flight) {
    const auto kept = options_;
    options_.rate_fps = 0;
    options_.max_in_flight = max_in_flight;
    options_.drop_late_ms = 0;
    const size_t n = chain_.size();
    std::vector<double> before(n + 1);
    for (size_t at = 0; at <= n; ++at) before[at] = cpu_at(at);
    ServeResult r;
    try {
      r = serve(frames, {});
    } catch (...) {
      options_ = kept;
      throw;
    }
    options_ = kept;
    ServingCosts::Way w;
    const auto count = static_cast<double>(std::max<size_t>(frames.size(), 1));
    w.master_cpu_ms = (cpu_at(0) - before[0]) / count;
    for (size_t i = 0; i < n; ++i) {
      w.worker_cpu_ms.push_back((cpu_at(i + 1) - before[i + 1]) / count);
      w.compute_cpu_ms.push_back(i < r.stages.size() ? r.stages[i].compute_cpu_ms / count : 0);
    }
    w.latency_ms = r.mean_latency_ms;
    return w;
  }

  /// The CPU time used so far by the process at position `at` of the chain's hops (0 and the
  /// chain's size: the master; i: worker i - 1), ms.
  double cpu_at(size_t at) {
    if (at == 0 || at > chain_.size()) return process_cpu_ms();
    const size_t i = at - 1;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(options_.timeout_ms));
    proto::WorkerReport rep;
    const auto status = stubs_[chain_[i]]->Report(&ctx, proto::ReportRequest(), &rep);
    if (!status.ok())
      throw std::runtime_error(
          call_failure(status, *channels_[chain_[i]], who(i), options_.timeout_ms));
    return rep.cpu_ms();
  }

  /// The median ms of `messages` probes of `values` values over hop `hop` (0: the master to the
  /// first worker; i: worker i - 1 to the next, or to the master from the last).
  double probe(size_t hop, int messages, int64_t values) {
    if (hop == 0) {
      // Over the frames' own connection.
      const auto channel = sender_ ? sender_->channel() : channels_[chain_[0]];
      const auto stub = proto::Worker::NewStub(channel);
      const auto call = [&](const proto::Frame& f, std::string* error) {
        grpc::ClientContext ctx;
        ctx.set_deadline(deadline_in(options_.timeout_ms));
        proto::Ack ack;
        const auto status = stub->Absorb(&ctx, f, &ack);
        if (!status.ok()) *error = call_failure(status, *channel, who(0), options_.timeout_ms);
        return status;
      };
      return time_probes(call, messages, {values}, options_.precision, options_.diff).at(0);
    }
    const size_t i = hop - 1;
    const bool last = hop == chain_.size();
    proto::ProbeRequest req;
    if (last) {
      req.set_collector(reply_to_);  // results go back whole, in float32
    } else {
      req.set_precision(to_proto(options_.precision));
      req.set_diff(options_.diff);
    }
    req.set_messages(messages);
    req.add_values(values);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(options_.timeout_ms * (messages + 3)));
    proto::ProbeReply reply;
    const auto status = stubs_[chain_[i]]->Probe(&ctx, req, &reply);
    const std::string to = last ? "the master" : who(i + 1);
    if (!status.ok())
      throw std::runtime_error(
          "probing the hop from " + who(i) + " to " + to + ": " +
          call_failure(status, *channels_[chain_[i]], who(i), options_.timeout_ms));
    if (reply.ms_size() != 1)
      throw std::runtime_error(who(i) + " answered " + std::to_string(reply.ms_size()) +
                               " probe times for one size");
    return reply.ms(0);
  }

  void configure(const std::vector<Stage>& stages, uint32_t number) {
    check_worker_count(chain_.size(), stages);
    if (!graph_) throw std::logic_error("ServeMaster::configure without a graph");
    const graph::SummaryGraph& graph = *graph_;
    links_ = stage_links(graph, stages);
    const std::string fingerprint = graph_fingerprint(graph);
    for (size_t i = 0; i < stages.size(); ++i) {
      proto::StageConfig c;
      c.set_plan(number);
      c.set_stage(static_cast<int>(i));
      for (int op : stages[i].ops) c.add_ops(graph.op(op).name);
      const std::vector<int>& in = i == 0 ? graph.inputs() : links_[i - 1];
      for (int v : in) c.add_inputs(onnx_value_name(graph, v));
      for (int v : links_[i]) c.add_outputs(onnx_value_name(graph, v));
      if (i + 1 < stages.size()) c.set_next(address(i + 1));
      c.set_fingerprint(fingerprint);
      c.set_weights(options_.weights);
      c.set_precision(to_proto(options_.precision));
      c.set_diff(options_.diff);
      c.set_timeout_ms(options_.timeout_ms);
      // The first contact may wait for a worker still loading its model.
      grpc::ClientContext ctx;
      ctx.set_deadline(deadline_in(options_.timeout_ms));
      ctx.set_wait_for_ready(true);
      proto::ConfigureReply reply;
      const auto status = stubs_[chain_[i]]->Configure(&ctx, c, &reply);
      if (!status.ok())
        throw std::runtime_error(
            call_failure(status, *channels_[chain_[i]], who(i), options_.timeout_ms));
    }
    plan_ = number;
    stages_ = stages;
    input_name_ = onnx_value_name(graph, graph.inputs().at(0));
    open_sender();
  }

  void attach(const std::string& input_name) {
    input_name_ = input_name;
    plan_ = 0;
    open_sender();
  }

  /// The link to the first worker; a new one starts the frame sequence (and its differences)
  /// afresh.
  void open_sender() {
    sender_.reset();
    sender_ = std::make_unique<LinkSender>(
        address(0), who(0), options_.link, options_.precision, options_.diff, options_.timeout_ms,
        [this](const proto::Frame& frame, const std::string& error) {
          proto::Result r;
          r.set_id(frame.id());
          r.set_error("frame " + std::to_string(frame.id()) + " could not be sent: " + error);
          std::lock_guard<std::mutex> lock(mutex_);
          results_[frame.id()] = r;
          arrived_.notify_all();
        });
    seq_ = 0;
  }

  ServeResult serve(const std::vector<at::Tensor>& frames,
                    const std::function<void(int, int)>& progress) {
    if (!sender_) throw std::logic_error("ServeMaster::serve before configure or attach");
    const int n = static_cast<int>(frames.size());
    Sending st = start_sending(n);
    ServeResult out = empty_result(n);
    int done = 0;
    auto last_ping = Clock::now(), last_rejoin = Clock::now();
    const auto ping_every = ms(ping_ms());
    while (done < n) {
      send_due(frames, done, st);
      while (done < st.next && st.dropped[static_cast<size_t>(done)]) {
        ++done;
        if (progress) progress(done, n);
      }
      if (done >= n) break;
      if (options_.rejoin && !lost_.empty() && Clock::now() >= last_rejoin + ping_every) {
        take_back(frames, done, st, out);
        last_rejoin = Clock::now();
      }
      const bool waiting = done < st.next;
      const auto frame_deadline =
          waiting ? st.last_sent[done] + ms(options_.timeout_ms) : Clock::time_point::max();
      const auto wake = std::min({next_due(st, done, n), frame_deadline, last_ping + ping_every});
      proto::Result r;
      bool got = false;
      if (waiting)
        got = wait_result(st.ids[done], wake, r);
      else
        std::this_thread::sleep_until(std::min(wake, Clock::now() + std::chrono::seconds(1)));
      const auto now = Clock::now();
      if (!got) {
        if (waiting && now >= frame_deadline)
          recover("no result for frame " + std::to_string(done) + " within " +
                      std::to_string(static_cast<int64_t>(options_.timeout_ms)) +
                      " ms: " + silent_worker(),
                  frames, done, st, out);
        if (waiting && now >= last_ping + ping_every) {
          // A worker that stops answering is named long before the frame's timeout.
          if (auto who = unanswering_worker(); !who.empty())
            recover("frame " + std::to_string(done) + " is waiting: " + who, frames, done, st, out);
          last_ping = Clock::now();
        }
        continue;
      }
      if (!r.error().empty()) {
        recover(r.error(), frames, done, st, out);
        continue;
      }
      out.sent_ms[done] = std::chrono::duration<double, std::milli>(st.sent[done] - st.t0).count();
      out.done_ms[done] = std::chrono::duration<double, std::milli>(now - st.t0).count();
      out.latency_ms[done] = out.done_ms[done] - out.sent_ms[done];
      add_result(r, done, out);
      ++done;
      if (progress) progress(done, n);
    }
    {
      // What is left came for frames already re-sent: dropped.
      std::lock_guard<std::mutex> lock(mutex_);
      out.late_results_dropped += static_cast<int>(results_.size());
      results_.clear();
    }
    out.dropped = st.dropped;
    out.dropped_count = static_cast<int>(std::count(st.dropped.begin(), st.dropped.end(), 1));
    summarise(out);
    return out;
  }

 private:
  /// Waits until `wake` for the result of frame `id`; true (with it in `r`) when it came.
  bool wait_result(uint64_t id, Clock::time_point wake, proto::Result& r) {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_.wait_until(lock, wake, [&] { return results_.count(id) > 0; });
    auto it = results_.find(id);
    if (it == results_.end()) return false;
    r = std::move(it->second);
    results_.erase(it);
    return true;
  }

  /// Where the sending of one serve() call stands.
  struct Sending {
    Clock::time_point t0;
    std::vector<Clock::time_point> sent;
    /// When each frame was last sent (again, after a failover): its timeout runs from there.
    std::vector<Clock::time_point> last_sent;
    /// Frames dropped unsent (MasterOptions::drop_late_ms).
    std::vector<char> dropped;
    std::vector<uint64_t> ids;
    /// Frames sent so far.
    int next = 0;
  };

  static Sending start_sending(int n) {
    Sending st;
    st.t0 = Clock::now();
    st.sent.resize(n);
    st.last_sent.resize(n);
    st.dropped.assign(static_cast<size_t>(n), 0);
    st.ids.resize(n);
    return st;
  }

  static Clock::duration ms(double v) {
    return std::chrono::microseconds(static_cast<int64_t>(v * 1000.0));
  }

  /// How long a worker may take to answer a report before the master names it: a quarter of the
  /// timeout, between 0.25 and 2 seconds.
  double ping_ms() const { return std::clamp(options_.timeout_ms / 4, 250.0, 2000.0); }

  /// When the next frame may go: at its time under --rate, as soon as a result frees a place under
  /// max_in_flight, never when all are sent.
  Clock::time_point next_due(const Sending& st, int done, int n) const {
    if (st.next >= n) return Clock::time_point::max();
    if (options_.max_in_flight > 0 && st.next - done >= options_.max_in_flight)
      return Clock::time_point::max();
    // A full link: look again in a millisecond (the sender's queue drains on its own threads).
    if (options_.max_queue > 0 && sender_->held() >= static_cast<size_t>(options_.max_queue))
      return Clock::now() + std::chrono::milliseconds(1);
    if (options_.rate_fps > 0) return st.t0 + ms(st.next * 1000.0 / options_.rate_fps);
    return Clock::now();
  }

  void send_due(const std::vector<at::Tensor>& frames, int done, Sending& st) {
    const int n = static_cast<int>(frames.size());
    while (st.next < n && next_due(st, done, n) <= Clock::now()) {
      st.sent[st.next] = Clock::now();
      // A frame is late only against a pace: unpaced (rate 0) there is no due time to compute.
      const bool paced = options_.drop_late_ms > 0 && options_.rate_fps > 0;
      if (paced && st.sent[st.next] - (st.t0 + ms(st.next * 1000.0 / options_.rate_fps)) >
                       ms(options_.drop_late_ms))
        st.dropped[static_cast<size_t>(st.next)] = 1;
      else
        send_frame(frames, st.next, st);
      ++st.next;
    }
  }

  /// Sends frame `k` under a new id (a re-sent frame keeps its first send time).
  void send_frame(const std::vector<at::Tensor>& frames, int k, Sending& st) {
    OutgoingFrame f;
    st.ids[k] = next_id_++;
    st.last_sent[k] = Clock::now();
    f.frame.set_id(st.ids[k]);
    f.frame.set_plan(plan_);
    f.frame.set_seq(seq_++);
    f.frame.set_reply_to(reply_to_);
    f.tensors.emplace_back(input_name_, frames[k].to(at::kFloat).contiguous());
    sender_->send(std::move(f));
  }

  /// A failure `cause` while frame `done` waits: without MasterOptions::replan, the run ends
  /// with it. With it, the workers of the chain that still answer a report get the plan it
  /// returns (plan number + 1), and every frame sent and not answered is sent again.
  void recover(const std::string& cause, const std::vector<at::Tensor>& frames, int done,
               Sending& st, ServeResult& out) {
    if (!options_.replan) throw std::runtime_error(cause);
    FailoverEvent e;
    e.cause = cause;
    e.frame = done;
    e.detected_ms = since(st.t0);
    std::vector<int> alive;
    for (int w : chain_) {
      if (ping(w).ok())
        alive.push_back(w);
      else
        e.lost.push_back(options_.workers[static_cast<size_t>(w)]);
    }
    // Every worker answers: the failure was the frame's, not a worker's.
    if (e.lost.empty()) throw std::runtime_error(cause);
    if (alive.empty()) throw std::runtime_error(cause + "; no worker is left to serve on");
    for (int w = 0; w < static_cast<int>(options_.workers.size()); ++w)
      if (std::find(alive.begin(), alive.end(), w) == alive.end() &&
          std::find(lost_.begin(), lost_.end(), w) == lost_.end())
        lost_.push_back(w);
    switch_plan(alive, frames, done, st, out, std::move(e));
  }

  /// With MasterOptions::rejoin: the lost workers that answer a report again are taken back.
  void take_back(const std::vector<at::Tensor>& frames, int done, Sending& st, ServeResult& out) {
    FailoverEvent e;
    e.frame = done;
    e.detected_ms = since(st.t0);
    std::vector<int> back;
    for (int w : lost_)
      if (ping(w).ok()) back.push_back(w);
    if (back.empty()) return;
    std::vector<int> workers;  // in chain order: the order of --workers
    for (int w = 0; w < static_cast<int>(options_.workers.size()); ++w) {
      const bool returns = std::find(back.begin(), back.end(), w) != back.end();
      if (returns) e.rejoined.push_back(options_.workers[static_cast<size_t>(w)]);
      if (returns || std::find(lost_.begin(), lost_.end(), w) == lost_.end()) workers.push_back(w);
    }
    for (int w : back) lost_.erase(std::find(lost_.begin(), lost_.end(), w));
    e.cause = join(e.rejoined) + (back.size() == 1 ? " answers" : " answer") + " again";
    switch_plan(workers, frames, done, st, out, std::move(e));
  }

  /// Configures the plan MasterOptions::replan gives for `workers` and re-sends every frame
  /// sent and not answered; records `e`.
  void switch_plan(const std::vector<int>& workers, const std::vector<at::Tensor>& frames, int done,
                   Sending& st, ServeResult& out, FailoverEvent e) {
    const Failover f = options_.replan(workers);
    if (f.workers.size() != f.stages.size() || f.workers.empty())
      throw std::logic_error("ServeMaster: a failover plan needs one worker per stage");
    chain_ = f.workers;
    configure(f.stages, plan_ + 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      out.late_results_dropped += static_cast<int>(results_.size());
      results_.clear();
    }
    for (int k = done; k < st.next; ++k)
      if (!st.dropped[static_cast<size_t>(k)]) send_frame(frames, k, st);
    e.plan = f.description;
    e.resent = st.next - done;
    e.resumed_ms = since(st.t0);
    out.failovers.push_back(std::move(e));
  }

  static double since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }

  /// The first worker that does not answer a report within ping_ms(), in our words; empty when
  /// all answer.
  std::string unanswering_worker() {
    for (size_t i = 0; i < chain_.size(); ++i) {
      const auto status = ping(chain_[i]);
      if (!status.ok()) return call_failure(status, *channels_[chain_[i]], who(i), ping_ms());
    }
    return "";
  }

  const std::string& address(size_t stage) const { return options_.workers.at(chain_.at(stage)); }
  std::string who(size_t stage) const {
    return "worker " + address(stage) + " (stage " + std::to_string(stage) + ")";
  }
  /// Worker `w`'s answer to a report asked within ping_ms().
  grpc::Status ping(int w) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_in(ping_ms()));
    proto::ReportRequest req;
    proto::WorkerReport rep;
    return stubs_[static_cast<size_t>(w)]->Report(&ctx, req, &rep);
  }

  std::string silent_worker() {
    const std::string who = unanswering_worker();
    return !who.empty() ? who
                        : "every worker answers, but the frame did not come back (a worker lost "
                          "it or is still busy: raise --timeout)";
  }

  const graph::SummaryGraph* graph_;
  MasterOptions options_;
  std::string address_, reply_to_, input_name_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<proto::Worker::Stub>> stubs_;
  /// The chain's workers, stage by stage, and those lost (indices into options_.workers).
  std::vector<int> chain_, lost_;
  std::vector<Stage> stages_;
  std::vector<std::vector<int>> links_;
  uint32_t plan_ = 0;
  int64_t seq_ = 0;
  uint64_t next_id_ = 1;
  std::unique_ptr<LinkSender> sender_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<uint64_t, proto::Result> results_;
};

ServeMaster::ServeMaster(const graph::SummaryGraph& graph, MasterOptions options)
    : impl_(std::make_unique<Impl>(&graph, std::move(options))) {}
ServeMaster::ServeMaster(MasterOptions options)
    : impl_(std::make_unique<Impl>(nullptr, std::move(options))) {}
void ServeMaster::attach(const std::string& input_name) { impl_->attach(input_name); }
std::vector<HopCost> ServeMaster::probe_hops(int messages) { return impl_->probe_hops(messages); }
ServingCosts ServeMaster::measure_serving(const std::vector<at::Tensor>& frames) {
  return impl_->measure_serving(frames);
}

ServeMaster::~ServeMaster() = default;
void check_worker_count(size_t workers, const std::vector<Stage>& stages) {
  if (stages.size() == workers) return;
  std::vector<std::string> names;
  for (const auto& s : stages) names.push_back(s.device_name);
  throw InputError("--workers gives " + std::to_string(workers) + " addresses; the plan runs " +
                   std::to_string(stages.size()) + " stages (" + join(names) + ")");
}

void ServeMaster::configure(const std::vector<Stage>& stages, uint32_t number) {
  impl_->configure(stages, number);
}
ServeResult ServeMaster::serve(const std::vector<at::Tensor>& frames,
                               const std::function<void(int, int)>& progress) {
  return impl_->serve(frames, progress);
}

}  // namespace igb::deploy
