#include "deploy/serve/fallback_cache.h"

#include <utility>

namespace igb::deploy {

void FallbackCache::keep(proto::Result r) {
  std::lock_guard<std::mutex> lock(mutex_);
  order_.push_back(r.id());
  kept_[r.id()] = std::move(r);
  while (order_.size() > kMaxFallbacks) {
    kept_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<proto::Result> FallbackCache::take(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kept_.find(id);
  if (it == kept_.end()) return std::nullopt;
  auto r = std::move(it->second);
  kept_.erase(it);
  return r;
}

void FallbackCache::set_next_lost(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  next_lost_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  next_lost_why_ = why;
}

std::string FallbackCache::next_lost() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::chrono::steady_clock::now() < next_lost_until_ ? next_lost_why_ : std::string();
}

}  // namespace igb::deploy
