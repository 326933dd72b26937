// The sending end of one link of a serving chain: frames go out in order, each tensor whole or as
// its difference from the previous frame's, at an emulated bandwidth and latency when asked.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "deploy/serve/link_emulation.h"
#include "deploy/serve/wire.h"

namespace igb::deploy {

/// A frame to send: the message without its tensors, and the tensors by name.
struct OutgoingFrame {
  proto::Frame frame;
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

class LinkSender {
 public:
  /// Frames on their way at once (calls not yet answered): a link whose latency is long carries
  /// the next frames while the first are in flight, as its stage model has it (latency does not
  /// hold the link). The receiver takes the differences of a stream in order however the calls
  /// overtake each other.
  static constexpr int kDeliveries = 4;

  /// Called (on the sender's thread) when a frame could not be delivered: the frame and the fault.
  using OnError = std::function<void(const proto::Frame& frame, const std::string& error)>;

  /// `who` names the receiver in messages ("stage 2 (127.0.0.1:5002)"). With `diff`, tensors
  /// after a frame's first are sent as differences (DiffEncoder) and frames leave in the order of
  /// their seq, from 0 (a stream starts there; a worker may finish its frames in another order);
  /// otherwise whole, in the order given.
  LinkSender(const std::string& address, std::string who, LinkEmulation link,
             TransferPrecision precision, bool diff, double timeout_ms, OnError on_error);
  /// Stops: frames not yet sent are dropped.
  ~LinkSender();
  LinkSender(const LinkSender&) = delete;
  LinkSender& operator=(const LinkSender&) = delete;

  /// Waits, once `capacity` frames are queued or on their way (0: no limit, the default), until
  /// one is delivered or fails: a receiver that takes frames slowly holds back the sender
  /// (backpressure) instead of its queue growing. In diff mode the frame the link waits for next
  /// never waits.
  void set_capacity(int capacity);
  void send(OutgoingFrame f);
  /// Frames queued, on their emulated way or being delivered.
  size_t held() const;
  /// A seq that will never be sent (its frame failed before): later frames need not wait for it.
  void skip(int64_t seq);

  /// The connection frames go over (it connects on its first call; connecting earlier, a
  /// receiver not up yet would fail the first frame at once): probes sent on it time the frames'
  /// own path and leave it connected.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  /// Payload bytes delivered, and the time the link took for them (transmission, the emulated
  /// delay included), ms.
  int64_t bytes_sent() const;
  double send_ms() const;

 private:
  struct InFlight {
    std::chrono::steady_clock::time_point due;
    proto::Frame frame;
    int64_t bytes = 0;
    double transmit_ms = 0;
  };
  void transmit_loop();
  void propagate_loop();
  /// Delivers `m` (one call, waited for), counting it or reporting its failure.
  void deliver(InFlight& m);
  bool ready_locked() const;
  /// Frames queued, on their emulated way or being delivered.
  size_t held_locked() const;
  proto::Frame encode(OutgoingFrame& f, int64_t* bytes);

  std::string who_;
  LinkEmulation link_;
  TransferPrecision precision_;
  bool diff_;
  double timeout_ms_;
  OnError on_error_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Worker::Stub> stub_;
  std::map<std::string, DiffEncoder> encoders_;
  /// Set when a frame was not delivered: the transmitting thread starts the encoders afresh.
  std::atomic<bool> reset_encoders_{false};

  mutable std::mutex mutex_;
  /// wake_: a frame to send (the transmitting thread); in_flight_ready_: one to deliver (one of
  /// the delivering threads); space_: room under the capacity.
  std::condition_variable wake_, in_flight_ready_, space_;
  bool stop_ = false;
  int capacity_ = 0, delivering_ = 0;
  std::deque<OutgoingFrame> fifo_;
  std::map<int64_t, OutgoingFrame> by_seq_;
  std::map<int64_t, bool> skipped_;
  int64_t next_seq_ = 0;
  std::deque<InFlight> in_flight_;
  int64_t bytes_sent_ = 0;
  double send_ms_ = 0;
  /// Since when a call has been on its way (while delivering_ > 0).
  std::chrono::steady_clock::time_point calls_since_;
  std::thread transmit_;
  std::vector<std::thread> propagate_;
};

}  // namespace igb::deploy
