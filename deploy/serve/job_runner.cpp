#include "deploy/serve/job_runner.h"

#include <time.h>

#include <chrono>
#include <thread>
#include <utility>

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

/// A cascade unit's answer to `head` from its own exit's `logits`.
proto::Result own_answer(const proto::Frame& head, const proto::Hop& hop, int stage,
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

}  // namespace

void JobRunner::run(Job& job) {
  WorkerRole& role = *job.role;
  CascadeUnitRole* unit = role.cascade();
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
    if (unit && unit->head) {
      logits = unit->head->forward(job.values.at(unit->exit_value));
      const double score = exit_scores(logits, unit->criterion).item<double>();
      hop.set_score(score);
      if (score >= unit->score_threshold) {
        answers = true;
        job.values.clear();
        job.values[-1] = logits;
      }
    }
  } catch (const std::exception& e) {
    fail(job, e);
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
    std::lock_guard<std::mutex> lock(counts_mutex_);
    ++counts_.frames;
    counts_.compute_ms += hop.compute_ms();
  }
  std::string fallback;
  if (!answers && logits.defined() && !(fallback = fallbacks_.next_lost()).empty()) {
    answers = true;
    job.values.clear();
    job.values[-1] = logits;
  }
  if (!answers) {
    if (logits.defined()) fallbacks_.keep(own_answer(job.head, hop, role.stage, logits));
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

void JobRunner::fail(Job& job, const std::exception& e) {
  const WorkerRole& role = *job.role;
  proto::Result r;
  r.set_id(job.head.id());
  r.set_error("stage " + std::to_string(role.stage) + " on worker " + address_ +
              " failed on frame " + std::to_string(job.head.id()) + ": " + error_line(e));
  if (role.sender) role.sender->skip(job.head.seq());
  {
    std::lock_guard<std::mutex> lock(counts_mutex_);
    ++counts_.errors;
  }
  answer(job.head.reply_to(), r);
}

void JobRunner::answer_job(Job& job, const proto::Hop& hop, const std::string& fallback) {
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

std::unique_ptr<LinkSender> JobRunner::make_sender(const std::string& next, const std::string& who,
                                                   TransferPrecision precision, bool diff,
                                                   double timeout_ms) {
  auto sender = std::make_unique<LinkSender>(
      next, who, options_.link, precision, diff, timeout_ms,
      [this, next](const proto::Frame& frame, const std::string& error) {
        // A cascade unit answers from its own exit instead, and does so for the next frames
        // too while the next unit stays lost.
        if (auto kept = fallbacks_.take(frame.id())) {
          kept->set_fallback("unit " + std::to_string(kept->answered_by() + 1) + " (" + next +
                             ") is lost: " + error);
          fallbacks_.set_next_lost(kept->fallback());
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

std::shared_ptr<grpc::Channel> JobRunner::collector_channel(const std::string& address) {
  std::lock_guard<std::mutex> lock(collectors_mutex_);
  auto& c = collectors_[address];
  if (!c) c = open_channel(address);
  return c;
}

void JobRunner::answer(const std::string& reply_to, const proto::Result& result) {
  const auto stub = proto::Collector::NewStub(collector_channel(reply_to));
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(10000));
  proto::Ack ack;
  (void)stub->Collect(&ctx, result, &ack);
}

JobRunner::Counts JobRunner::counts() {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  return counts_;
}

}  // namespace igb::deploy
