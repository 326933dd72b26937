#include "deploy/serve/link_sender.h"

#include <algorithm>

namespace igb::deploy {

using Clock = std::chrono::steady_clock;

LinkSender::LinkSender(const std::string& address, std::string who, LinkEmulation link,
                       TransferPrecision precision, bool diff, double timeout_ms, OnError on_error)
    : who_(std::move(who)),
      link_(link),
      precision_(precision),
      diff_(diff),
      timeout_ms_(timeout_ms),
      on_error_(std::move(on_error)),
      channel_(open_channel(address)),
      stub_(proto::Worker::NewStub(channel_)) {
  transmit_ = std::thread([this] { transmit_loop(); });
  for (int i = 0; i < kDeliveries; ++i) propagate_.emplace_back([this] { propagate_loop(); });
}

LinkSender::~LinkSender() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  in_flight_ready_.notify_all();
  space_.notify_all();
  transmit_.join();
  for (auto& t : propagate_) t.join();
}

void LinkSender::set_capacity(int capacity) {
  std::lock_guard<std::mutex> lock(mutex_);
  capacity_ = capacity;
}

size_t LinkSender::held_locked() const {
  return fifo_.size() + by_seq_.size() + in_flight_.size() + static_cast<size_t>(delivering_);
}

size_t LinkSender::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return held_locked();
}

void LinkSender::send(OutgoingFrame f) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    space_.wait(lock, [&] {
      return stop_ || capacity_ <= 0 || held_locked() < static_cast<size_t>(capacity_) ||
             (diff_ && f.frame.seq() <= next_seq_);
    });
    if (stop_) return;
    if (diff_) {
      const int64_t seq = f.frame.seq();
      if (seq < next_seq_) next_seq_ = seq;
      by_seq_[seq] = std::move(f);
    } else {
      fifo_.push_back(std::move(f));
    }
  }
  wake_.notify_all();
}

void LinkSender::skip(int64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!diff_) return;
    skipped_[seq] = true;
  }
  wake_.notify_all();
}

int64_t LinkSender::bytes_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_sent_;
}

double LinkSender::send_ms() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return send_ms_;
}

bool LinkSender::ready_locked() const {
  if (!diff_) return !fifo_.empty();
  return by_seq_.count(next_seq_) > 0 || skipped_.count(next_seq_) > 0;
}

proto::Frame LinkSender::encode(OutgoingFrame& f, int64_t* bytes) {
  proto::Frame out = std::move(f.frame);
  *bytes = 0;
  if (reset_encoders_.exchange(false)) encoders_.clear();
  for (auto& [name, t] : f.tensors) {
    EncodedTensor e;
    if (diff_) {
      auto it = encoders_.try_emplace(name, precision_).first;
      e = it->second.encode(t);
    } else {
      e = encode_tensor(t, precision_);
    }
    *bytes += static_cast<int64_t>(e.payload.size());
    to_proto(std::move(e), name, out.add_tensors());
  }
  return out;
}

void LinkSender::transmit_loop() {
  for (;;) {
    OutgoingFrame f;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        if (stop_) return true;
        // Skipped seqs are passed over here, so the wait ends on a frame or stop.
        while (diff_ && skipped_.count(next_seq_) > 0) skipped_.erase(next_seq_++);
        return ready_locked();
      });
      if (stop_) return;
      if (diff_) {
        auto it = by_seq_.find(next_seq_);
        f = std::move(it->second);
        by_seq_.erase(it);
        ++next_seq_;
      } else {
        f = std::move(fifo_.front());
        fifo_.pop_front();
      }
    }
    InFlight m;
    m.frame = encode(f, &m.bytes);
    const auto start = Clock::now();
    if (link_.bandwidth_mb_s > 0) {
      // The link is busy for the message's transmission: later messages wait behind it.
      const double seconds = static_cast<double>(m.bytes) / (link_.bandwidth_mb_s * 1e6);
      std::this_thread::sleep_until(start +
                                    std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
    }
    const auto sent = Clock::now();
    m.transmit_ms = std::chrono::duration<double, std::milli>(sent - start).count();
    m.due = sent + std::chrono::microseconds(static_cast<int64_t>(link_.latency_ms * 1000.0));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_.push_back(std::move(m));
    }
    in_flight_ready_.notify_one();
  }
}

void LinkSender::propagate_loop() {
  for (;;) {
    InFlight m;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      in_flight_ready_.wait(lock, [&] { return stop_ || !in_flight_.empty(); });
      if (stop_) return;
      m = std::move(in_flight_.front());
      in_flight_.pop_front();
      if (delivering_++ == 0) calls_since_ = Clock::now();
    }
    // Propagation delay: the message is on its way, the link already free for the next one.
    std::this_thread::sleep_until(m.due);
    deliver(m);
  }
}

void LinkSender::deliver(InFlight& m) {
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(timeout_ms_));
  proto::Ack ack;
  const grpc::Status status = stub_->Deliver(&ctx, m.frame, &ack);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The link's time: its emulated transmissions, and the time any call was on its way.
    if (--delivering_ == 0)
      send_ms_ += std::chrono::duration<double, std::milli>(Clock::now() - calls_since_).count();
    if (status.ok()) {
      bytes_sent_ += m.bytes;
      send_ms_ += m.transmit_ms;
    }
  }
  space_.notify_all();
  if (status.ok()) return;
  // The receiver did not take the frame: what it holds is no longer what the encoders assume,
  // so the next frame goes whole.
  reset_encoders_ = true;
  if (on_error_) on_error_(m.frame, status_text(status, who_, timeout_ms_));
}

}  // namespace igb::deploy
