#include "deploy/serve/frame_decoder.h"

#include <cstdint>
#include <vector>

#include "core/error.h"

namespace igb::deploy {

namespace {

std::string shape_text(const std::vector<int64_t>& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "x" : "") + std::to_string(s[i]);
  return out.empty() ? "a scalar" : out;
}

}  // namespace

grpc::Status FrameDecoder::decode(const proto::Frame& frame,
                                  const std::map<std::string, const proto::Tensor*>& by_name,
                                  std::chrono::steady_clock::time_point received,
                                  const std::string& what, WorkerRole& role, Job& job) {
  try {
    std::unique_lock<std::mutex> lock(mutex_);
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
      at::Tensor x = role.diff() || e.difference ? decoders[name].decode(e, tensor_what)
                                                 : decode_tensor(e, tensor_what);
      if (x.sizes().vec() != graph_.shape(id))
        return refuse(tensor_what + " is " + shape_text(x.sizes().vec()) + "; stage " +
                      std::to_string(role.stage) + " takes " + shape_text(graph_.shape(id)));
      job.bytes_in += static_cast<int64_t>(e.payload.size());
      // The decoder keeps the tensor as the base of the next difference; the stage may change
      // its inputs in place (a traced ReLU_), so it gets a copy.
      job.values[id] = role.diff() || e.difference ? x.clone() : std::move(x);
    }
    role.decoders = std::move(decoders);
    role.last_seq = frame.seq();
    decoded_.notify_all();
  } catch (const InputError& e) {
    return refuse(e.what());
  }
  return grpc::Status::OK;
}

void FrameDecoder::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  decoded_.notify_all();
}

}  // namespace igb::deploy
