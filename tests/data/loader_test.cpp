#include "data/loader.h"

#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/host.h"
#include "core/rng.h"

namespace igb::data {

namespace {
// Example i of epoch e is a tensor holding (i, e, a seeded random number).
class ToyDataset : public Dataset {
 public:
  int64_t size() const override { return 37; }
  Example get(int64_t index, int64_t epoch) const override {
    Rng rng = Rng::from(11, epoch, index);
    return {torch::tensor({float(index), float(epoch), float(rng.uniform())}),
            torch::tensor(index)};
  }
};

// Records the largest intra-op thread count LibTorch reports where the examples are built, and
// fails on example `bad`.
class ThreadCountDataset : public Dataset {
 public:
  mutable std::atomic<int> most_threads{0};
  int64_t bad = -1;
  int64_t size() const override { return 12; }
  Example get(int64_t index, int64_t) const override {
    if (index == bad) throw std::runtime_error("example " + std::to_string(index) + " is broken");
    int seen = at::get_num_threads();
    int prev = most_threads.load();
    while (seen > prev && !most_threads.compare_exchange_weak(prev, seen)) {
    }
    return {torch::full({2}, float(index)), torch::tensor(index)};
  }
};

// Sets LibTorch's thread count for a test and restores it after.
struct ThreadCount {
  int saved = at::get_num_threads();
  explicit ThreadCount(int n) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(saved); }
};
}  // namespace

TEST(SerialScope, OneThreadInsideOnlyOnItsOwnThread) {
  ThreadCount two(2);
  {
    SerialScope serial;
    EXPECT_EQ(at::get_num_threads(), 1);
    int elsewhere = 0;
    std::thread([&] { elsewhere = at::get_num_threads(); }).join();
    EXPECT_EQ(elsewhere, 2);
    {
      SerialScope nested;
      EXPECT_EQ(at::get_num_threads(), 1);
    }
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2);
}

TEST(BatchLoader, BuildsBatchesSeriallyOnWorkersAndOnTheCaller) {
  ThreadCount two(2);
  for (int64_t workers : {0, 2}) {
    ThreadCountDataset ds;
    LoaderOptions o;
    o.batch_size = 3;
    o.workers = workers;
    BatchLoader loader(ds, o);
    loader.start_epoch(0);
    Example b;
    int64_t batches = 0;
    while (loader.next(b)) ++batches;
    EXPECT_EQ(batches, 4);
    EXPECT_EQ(ds.most_threads.load(), 1) << workers << " workers";
    EXPECT_EQ(at::get_num_threads(), 2) << "the caller's thread count is restored";
  }
}

TEST(BatchLoader, AWorkersErrorReachesTheCallerAtItsBatch) {
  ThreadCountDataset ds;
  ds.bad = 7;
  LoaderOptions o;
  o.batch_size = 3;
  o.shuffle = false;
  o.workers = 2;
  BatchLoader loader(ds, o);
  loader.start_epoch(0);
  Example b;
  EXPECT_TRUE(loader.next(b));
  EXPECT_TRUE(loader.next(b));
  EXPECT_EQ(b.input[0][0].item<float>(), 3.f);
  try {
    loader.next(b);
    FAIL() << "batch 2 holds the broken example";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "example 7 is broken");
  }
  EXPECT_TRUE(loader.next(b)) << "the batches after it still come";
  EXPECT_EQ(b.input[0][0].item<float>(), 9.f);
}

TEST(BatchLoader, SameBatchesWhateverTheWorkers) {
  ToyDataset ds;
  std::vector<std::vector<at::Tensor>> runs;
  for (int64_t workers : {0, 1, 3}) {
    LoaderOptions o;
    o.batch_size = 5;
    o.workers = workers;
    o.seed = 42;
    BatchLoader loader(ds, o);
    EXPECT_EQ(loader.batches(), 7);  // 37 / 5, last partial batch dropped
    std::vector<at::Tensor> got;
    for (int64_t epoch : {0, 1}) {
      loader.start_epoch(epoch);
      Example b;
      while (loader.next(b)) got.push_back(b.input);
    }
    runs.push_back(got);
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].size(), runs[0].size());
    for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(torch::equal(runs[r][i], runs[0][i]));
  }
}

TEST(BatchLoader, RanksSplitTheBatchesOfOneProcessWithTheirCombinedBatch) {
  // 37 examples: one process with batch 6 has 6 batches; three ranks of batch 2 have 6 each, and
  // batch b of ranks 0, 1, 2 in that order is batch b of the single process.
  ToyDataset ds;
  LoaderOptions whole;
  whole.batch_size = 6;
  whole.seed = 9;
  whole.workers = 0;
  BatchLoader single(ds, whole);
  ASSERT_EQ(single.batches(), 6);
  std::vector<std::unique_ptr<BatchLoader>> ranks;
  for (int64_t r = 0; r < 3; ++r) {
    LoaderOptions o = whole;
    o.batch_size = 2;
    o.world_size = 3;
    o.rank = r;
    o.workers = r;  // prefetching changes nothing
    ranks.push_back(std::make_unique<BatchLoader>(ds, o));
    EXPECT_EQ(ranks.back()->batches(), 6);
  }
  for (int64_t epoch : {0, 3}) {
    single.start_epoch(epoch);
    for (auto& r : ranks) r->start_epoch(epoch);
    Example all, part;
    int64_t n = 0;
    while (single.next(all)) {
      std::vector<at::Tensor> pieces;
      for (auto& r : ranks) {
        ASSERT_TRUE(r->next(part));
        ASSERT_EQ(part.input.size(0), 2);
        pieces.push_back(part.input);
      }
      EXPECT_TRUE(torch::equal(torch::cat(pieces), all.input))
          << "epoch " << epoch << " batch " << n;
      ++n;
    }
    EXPECT_EQ(n, 6);
    for (auto& r : ranks) EXPECT_FALSE(r->next(part));
  }
}

TEST(BatchLoader, ShufflesAPermutationPerEpoch) {
  ToyDataset ds;
  LoaderOptions o;
  o.seed = 3;
  BatchLoader loader(ds, o);
  auto e0 = loader.order(0), e1 = loader.order(1);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 37u);
  EXPECT_EQ(loader.order(0), e0);
  o.shuffle = false;
  BatchLoader plain(ds, o);
  EXPECT_EQ(plain.order(5)[10], 10);
}

TEST(BatchLoader, KeepLastAndMaxBatches) {
  ToyDataset ds;
  LoaderOptions o;
  o.batch_size = 10;
  o.drop_last = false;
  o.workers = 2;
  BatchLoader loader(ds, o);
  EXPECT_EQ(loader.batches(), 4);
  loader.start_epoch(0);
  Example b;
  int64_t seen = 0;
  while (loader.next(b)) seen += b.input.size(0);
  EXPECT_EQ(seen, 37);
  loader.set_max_batches(2);
  EXPECT_EQ(loader.batches(), 2);
}

}  // namespace igb::data
