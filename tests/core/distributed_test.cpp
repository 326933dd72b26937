#include "core/distributed.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "core/subprocess.h"
#include "tests/support.h"

namespace igb {

namespace {

using std::chrono::milliseconds;

DistEnv env_of(int64_t rank, int64_t world, int64_t port) {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.local_rank = rank;
  e.local_world_size = world;
  e.master_port = port;
  return e;
}

/// Runs `body(rank, group)` in `world` threads, each a rank of one job on a fresh port; returns
/// each rank's error message ("" when it finished).
std::vector<std::string> run_ranks(int64_t world, milliseconds timeout,
                                   const std::function<void(int64_t, Distributed&)>& body) {
  const int64_t port = free_local_port();
  std::vector<std::future<std::string>> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.push_back(std::async(std::launch::async, [=, &body]() -> std::string {
      try {
        Distributed group(env_of(r, world, port), timeout);
        body(r, group);
      } catch (const std::exception& e) {
        return e.what();
      }
      return "";
    }));
  std::vector<std::string> errors;
  for (auto& f : ranks) errors.push_back(f.get());
  return errors;
}

class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::pair<const char*, const char*>> vars) {
    for (const char* name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
      unsetenv(name);
    for (const auto& [k, v] : vars) setenv(k, v, 1);
  }
  ~EnvGuard() {
    for (const char* name :
         {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
      unsetenv(name);
  }
};

}  // namespace

TEST(Distributed, AveragesInBucketsOfMixedTypesAndBroadcastsRankZeros) {
  torch::manual_seed(3);
  // Per rank: a float tensor, a double one and a float one again; a 64-byte bucket limit splits
  // the floats into several buckets.
  std::vector<std::vector<at::Tensor>> inputs;
  for (int r = 0; r < 3; ++r)
    inputs.push_back({torch::randn({4, 5}), torch::randn({3}, at::kDouble), torch::randn({7})});
  std::vector<std::vector<at::Tensor>> averaged(3), broadcast(3);
  auto errors = run_ranks(3, milliseconds(20000), [&](int64_t r, Distributed& g) {
    EXPECT_EQ(g.world_size(), 3);
    EXPECT_EQ(g.is_main(), r == 0);
    for (const auto& t : inputs[r]) averaged[r].push_back(t.clone());
    g.average(averaged[r], /*bucket_bytes=*/64);
    for (const auto& t : inputs[r]) broadcast[r].push_back(t.clone());
    g.broadcast(broadcast[r], 64);
    EXPECT_DOUBLE_EQ(g.sum({1.0, double(r)})[1], 3.0);
    EXPECT_TRUE(g.any(r == 2));
    EXPECT_FALSE(g.any(false));
    EXPECT_EQ(g.average_calls(), 1);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    const auto mean = (inputs[0][i] + inputs[1][i] + inputs[2][i]) / 3;
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(torch::allclose(averaged[r][i], mean, 1e-6, 1e-6)) << "rank " << r << " t" << i;
      EXPECT_EQ(averaged[r][i].scalar_type(), inputs[0][i].scalar_type());
      EXPECT_TRUE(torch::equal(broadcast[r][i], inputs[0][i])) << "rank " << r << " t" << i;
    }
  }
}

TEST(Distributed, ParametersGetZeroGradientsSoEveryRankReducesTheSameList) {
  auto a = torch::ones({2}, torch::requires_grad());
  auto b = torch::ones({3}, torch::requires_grad());
  auto frozen = torch::ones({4});
  (a * 2).sum().backward();
  auto grads = gradients_for_reduction({a, frozen, b});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_TRUE(torch::equal(grads[0], torch::full({2}, 2.0)));
  EXPECT_TRUE(torch::equal(grads[1], torch::zeros({3})));
  EXPECT_TRUE(b.grad().defined());
}

TEST(Distributed, ARankThatLeavesEndsTheOthersWithAClearError) {
  // Rank 1 leaves after the first all-reduce; rank 0's second one fails at once, well before
  // the 20 s timeout, naming itself and the operation.
  const auto t0 = std::chrono::steady_clock::now();
  auto errors = run_ranks(2, milliseconds(20000), [&](int64_t r, Distributed& g) {
    std::vector<at::Tensor> t{torch::ones({8})};
    g.average(t);
    if (r == 1) return;
    g.average(t);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 15);
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("distributed training: rank 0 of 2: gradient all-reduce failed"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[0].find(".cc:"), std::string::npos) << errors[0];
  EXPECT_EQ(errors[0].find('\n'), std::string::npos) << errors[0];
}

TEST(Distributed, ARankThatHangsEndsTheOthersAfterTheTimeout) {
  std::promise<void> release;
  auto released = release.get_future().share();
  const auto t0 = std::chrono::steady_clock::now();
  double failed_after = 0;
  // 3 s: long enough for two ranks to join on a loaded machine (the join shares the timeout).
  auto errors = run_ranks(2, milliseconds(3000), [&](int64_t r, Distributed& g) {
    std::vector<at::Tensor> t{torch::ones({8})};
    g.average(t);
    if (r == 1) {
      released.wait();  // hangs until rank 0 has given up
      return;
    }
    try {
      g.average(t);
    } catch (...) {
      failed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      release.set_value();
      throw;
    }
  });
  EXPECT_NE(errors[0].find("not answered within 3 s (--dist-timeout)"), std::string::npos)
      << errors[0];
  EXPECT_GT(failed_after, 2.5);
  EXPECT_LT(failed_after, 15.0);
}

TEST(Distributed, AJobThatNeverAssemblesStopsAtTheTimeout) {
  // Rank 0 of a job of two whose rank 1 never comes.
  DistEnv e = env_of(0, 2, free_local_port());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Distributed g(e, milliseconds(1000));
    FAIL() << "joined a job without its second rank";
  } catch (const std::runtime_error& err) {
    EXPECT_NE(std::string(err.what()).find("rank 0 of 2 could not join the job at 127.0.0.1:"),
              std::string::npos)
        << err.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
}

TEST(DistEnv, ReadsTheLauncherVariablesAndRejectsBadOnes) {
  {
    EnvGuard env({});
    EXPECT_FALSE(dist_env_from_environment().has_value());
  }
  {
    EnvGuard env({{"RANK", "3"},
                  {"WORLD_SIZE", "4"},
                  {"LOCAL_RANK", "1"},
                  {"LOCAL_WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "node7"},
                  {"MASTER_PORT", "4242"}});
    const auto e = dist_env_from_environment();
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->rank, 3);
    EXPECT_EQ(e->world_size, 4);
    EXPECT_EQ(e->local_rank, 1);
    EXPECT_EQ(e->local_world_size, 2);
    EXPECT_EQ(e->master_addr, "node7");
    EXPECT_EQ(e->master_port, 4242);
  }
  {
    EnvGuard env({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    const auto e = dist_env_from_environment();
    EXPECT_EQ(e->master_addr, "127.0.0.1");
    EXPECT_EQ(e->master_port, 29500);
    EXPECT_EQ(e->local_world_size, 2);
  }
  const auto error_with = [](std::vector<std::pair<const char*, const char*>> vars) {
    EnvGuard env(std::move(vars));
    return test::input_error_of([] { dist_env_from_environment(); });
  };
  EXPECT_EQ(error_with({{"WORLD_SIZE", "two"}}),
            "environment variable WORLD_SIZE is 'two', not an integer");
  EXPECT_EQ(error_with({{"WORLD_SIZE", "2"}}),
            "environment variable WORLD_SIZE is 2 but RANK is not set");
  EXPECT_EQ(error_with({{"WORLD_SIZE", "2"}, {"RANK", "2"}}),
            "environment variable RANK is 2, not below WORLD_SIZE 2");
  EXPECT_EQ(error_with({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_PORT", "70000"}}),
            "environment variable MASTER_PORT is 70000, outside [1, 65535]");
}

}  // namespace igb
