#include "deploy/serve/master_reports.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace igb::deploy {

WorkerInfo worker_report(const std::string& address, double timeout_ms, bool measure_costs) {
  silence_grpc_log();
  const auto channel = open_channel(address);
  auto stub = proto::Worker::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(timeout_ms));
  ctx.set_wait_for_ready(true);
  proto::ReportRequest req;
  req.set_measure_costs(measure_costs);
  proto::WorkerReport rep;
  const auto status = stub->Report(&ctx, req, &rep);
  if (!status.ok())
    throw std::runtime_error(call_failure(status, *channel, "worker " + address, timeout_ms));
  WorkerInfo w;
  w.model = rep.model();
  w.fingerprint = rep.fingerprint();
  w.machine = rep.machine();
  w.host = rep.host();
  w.cores = rep.cores();
  w.cpu_ms = rep.cpu_ms();
  w.input_shape.assign(rep.input_shape().begin(), rep.input_shape().end());
  w.input_name = rep.input_name();
  w.cascade = rep.cascade();
  w.stage = rep.stage();
  w.frames = rep.frames();
  w.errors = rep.errors();
  w.bytes_sent = rep.bytes_sent();
  w.compute_ms = rep.compute_ms();
  w.send_ms = rep.send_ms();
  for (const auto& c : rep.costs()) w.costs[c.op()] = c.ms();
  return w;
}

ServeResult empty_result(int n) {
  ServeResult out;
  out.outputs.resize(n);
  out.latency_ms.resize(n);
  out.sent_ms.resize(n);
  out.done_ms.resize(n);
  out.answered_by.resize(n);
  out.fallback.resize(n);
  out.score.resize(n);
  return out;
}

void add_result(const proto::Result& r, int done, ServeResult& out) {
  for (const auto& t : r.outputs())
    out.outputs[done].push_back(
        decode_tensor(from_proto(t), "the result of frame " + std::to_string(done)));
  out.answered_by[done] = r.answered_by();
  out.fallback[done] = r.fallback();
  out.score[done] = r.score();
  for (const auto& h : r.hops()) {
    if (h.stage() < 0 || h.stage() >= 1024) continue;
    const auto stage = static_cast<size_t>(h.stage());
    if (out.stages.size() <= stage) {
      out.stages.resize(stage + 1);
      out.link_bytes_first.resize(stage + 1, 0);
      out.link_bytes_later.resize(stage + 1, 0);
    }
    auto& st = out.stages[stage];
    st.worker = h.worker();
    st.compute_ms += h.compute_ms();
    st.compute_cpu_ms += h.compute_cpu_ms();
    st.queue_ms += h.queue_ms();
    st.bytes_in += h.bytes_in();
    st.bytes_out += h.bytes_out();
    (done == 0 ? out.link_bytes_first : out.link_bytes_later)[h.stage()] += h.bytes_in();
  }
}

void summarise(ServeResult& out) {
  std::vector<size_t> answered;
  for (size_t i = 0; i < out.latency_ms.size(); ++i)
    if (out.dropped.empty() || !out.dropped[i]) answered.push_back(i);
  const auto n = static_cast<int>(answered.size());
  double sum = 0;
  for (size_t i : answered) {
    sum += out.latency_ms[i];
    out.max_latency_ms = std::max(out.max_latency_ms, out.latency_ms[i]);
  }
  out.mean_latency_ms = n > 0 ? sum / n : 0;
  if (n > 1) {
    const double span = out.done_ms[answered.back()] - out.done_ms[answered.front()];
    out.steady_fps = span > 0 ? (n - 1) / span * 1000.0 : 0;
  }
}

}  // namespace igb::deploy
