#include "deploy/serve/job_queue.h"

namespace igb::deploy {

bool JobQueue::push(std::unique_ptr<Job> job, std::chrono::steady_clock::time_point until,
                    size_t* held) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto room = [&] {
      return closed_ || capacity_ <= 0 || jobs_.size() < static_cast<size_t>(capacity_);
    };
    if (!space_.wait_until(lock, until, room)) {
      *held = jobs_.size();
      return false;
    }
    jobs_.push_back(std::move(job));
  }
  changed_.notify_one();
  return true;
}

std::unique_ptr<Job> JobQueue::pop() {
  std::unique_ptr<Job> job;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return closed_ || !jobs_.empty(); });
    if (closed_) return nullptr;
    job = std::move(jobs_.front());
    jobs_.pop_front();
  }
  space_.notify_one();
  return job;
}

bool JobQueue::close() {
  bool was_closed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    was_closed = closed_;
    closed_ = true;
  }
  changed_.notify_all();
  closed_once_.notify_all();
  space_.notify_all();
  return was_closed;
}

bool JobQueue::closed() {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

void JobQueue::wait_closed() {
  std::unique_lock<std::mutex> lock(mutex_);
  closed_once_.wait(lock, [&] { return closed_; });
}

}  // namespace igb::deploy
