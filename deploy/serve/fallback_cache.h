// A cascade unit's own answers to the frames it passed on, kept so that it can answer them itself
// when the next unit is lost. Internal to deploy/serve/; StageWorker::Impl (serve_worker.cpp)
// states the worker's locking order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "deploy/serve/wire.h"

namespace igb::deploy {

class FallbackCache {
 public:
  /// Answers kept at most: the frames passed on last.
  static constexpr size_t kMaxFallbacks = 4096;

  /// Keeps the answer `r` to frame r.id() until the next unit is known to have the frame.
  void keep(proto::Result r);
  /// The answer kept for frame `id`, taken out; none when it was not kept (or has gone).
  std::optional<proto::Result> take(uint64_t id);
  /// The next unit was lost for `why`: for 5 s the unit answers from its own exit.
  void set_next_lost(const std::string& why);
  /// Why the unit answers from its own exit now (the next unit was lost within 5 s), or "".
  std::string next_lost();

 private:
  std::mutex mutex_;
  std::map<uint64_t, proto::Result> kept_;
  std::deque<uint64_t> order_;
  std::chrono::steady_clock::time_point next_lost_until_;
  std::string next_lost_why_;
};

}  // namespace igb::deploy
