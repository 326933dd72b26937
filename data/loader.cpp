#include "data/loader.h"

#include "core/host.h"
#include "core/rng.h"

namespace igb::data {

BatchLoader::BatchLoader(const Dataset& dataset, LoaderOptions options)
    : dataset_(dataset), options_(options) {
  TORCH_CHECK(options_.batch_size > 0, "batch size must be positive, got ", options_.batch_size);
  TORCH_CHECK(options_.world_size > 0 && options_.rank >= 0 && options_.rank < options_.world_size,
              "rank ", options_.rank, " outside a world of ", options_.world_size);
  TORCH_CHECK(options_.world_size == 1 || options_.drop_last,
              "a sharded loader drops the incomplete last round");
}

BatchLoader::~BatchLoader() {
  drain();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchLoader::submit(int64_t b) {
  if (threads_.empty())
    for (int64_t i = 0; i < options_.workers; ++i) threads_.emplace_back([this] { work(); });
  std::promise<Example> result;
  pending_.push_back(result.get_future());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.emplace_back(b, std::move(result));
  }
  wake_.notify_one();
}

void BatchLoader::work() {
  SerialScope serial;
  for (;;) {
    std::pair<int64_t, std::promise<Example>> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    try {
      job.second.set_value(make_batch(job.first));
    } catch (...) {
      job.second.set_exception(std::current_exception());
    }
  }
}

void BatchLoader::drain() {
  for (auto& f : pending_)
    if (f.valid()) f.wait();
  pending_.clear();
}

int64_t BatchLoader::batches() const {
  const int64_t round = options_.batch_size * options_.world_size;
  int64_t n = dataset_.size() / round;
  if (!options_.drop_last && dataset_.size() % round) ++n;
  if (max_batches_ > 0) n = std::min(n, max_batches_);
  return n;
}

std::vector<int64_t> BatchLoader::order(int64_t epoch) const {
  std::vector<int64_t> idx(dataset_.size());
  for (int64_t i = 0; i < dataset_.size(); ++i) idx[i] = i;
  if (options_.shuffle) {
    Rng rng = Rng::from(options_.seed, static_cast<uint64_t>(epoch), 0x5A1F);
    for (int64_t i = dataset_.size() - 1; i > 0; --i) std::swap(idx[i], idx[rng.integer(0, i)]);
  }
  return idx;
}

void BatchLoader::start_epoch(int64_t epoch) {
  drain();
  epoch_ = epoch;
  order_ = order(epoch);
  next_submit_ = next_take_ = 0;
}

Example BatchLoader::make_batch(int64_t b) const {
  int64_t begin = (b * options_.world_size + options_.rank) * options_.batch_size;
  int64_t end = std::min<int64_t>(begin + options_.batch_size, dataset_.size());
  std::vector<at::Tensor> inputs, targets;
  for (int64_t i = begin; i < end; ++i) {
    Example e = dataset_.get(order_[i], epoch_);
    inputs.push_back(e.input);
    targets.push_back(e.target);
  }
  return {torch::stack(inputs), torch::stack(targets)};
}

bool BatchLoader::next(Example& batch) {
  const int64_t total = batches();
  if (next_take_ >= total) return false;
  if (options_.workers <= 0) {
    SerialScope serial;  // the same bits as a worker's batch
    batch = make_batch(next_take_++);
    return true;
  }
  while (next_submit_ < total && static_cast<int64_t>(pending_.size()) < options_.workers)
    submit(next_submit_++);
  std::future<Example> front = std::move(pending_.front());
  pending_.pop_front();
  ++next_take_;
  if (next_submit_ < total) submit(next_submit_++);
  batch = front.get();
  return true;
}

}  // namespace igb::data
