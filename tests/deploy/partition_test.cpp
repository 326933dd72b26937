#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "deploy/onnx/onnx_runtime.h"
#include "deploy/partition/devices_file.h"
#include "deploy/partition/graph_problem.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "deploy/partition/plan_file.h"
#include "deploy/partition/stages.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"

namespace igb::deploy {
namespace {

namespace fs = std::filesystem;
using tools::graph_of;
using tools::make;

fs::path partition_folder(const std::string& name) {
  auto dir =
      fs::temp_directory_path() / ("igb_partition_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// A random DAG of `n` nodes on `k` devices: each node reads one to three earlier values (the
/// frame or a node's output), so values have several readers; the last node's output is the
/// model's; costs, bytes and (with `memory`) memory limits random.
PartitionProblem random_problem(std::mt19937& rng, int n, int k, bool memory = false) {
  std::uniform_real_distribution<double> cost(0.1, 10), bytes(1e3, 2e6), unit(0, 1);
  PartitionProblem p;
  p.model = "random";
  for (int d = 0; d < k; ++d) {
    p.devices.push_back("d" + std::to_string(d));
    p.memory_bytes.push_back(std::numeric_limits<double>::infinity());
  }
  for (int l = 0; l + 1 < k; ++l) p.links.push_back({1e6 * (1 + 9 * unit(rng)), unit(rng) * 3});
  // Value 0 is the frame; value i + 1 is node i's output.
  p.values.push_back({"input", -1, {}, false, bytes(rng)});
  for (int i = 0; i < n; ++i) {
    PartitionNode node;
    node.name = "n" + std::to_string(i);
    node.type = "Op";
    const double base = cost(rng);
    for (int d = 0; d < k; ++d) node.cost_ms.push_back(base * (0.3 + 1.4 * unit(rng)));
    node.param_bytes = static_cast<int64_t>(unit(rng) * 1000);
    p.nodes.push_back(node);
    std::set<int> reads;
    const int fan = 1 + static_cast<int>(unit(rng) * 3);
    for (int j = 0; j < fan; ++j) reads.insert(static_cast<int>(unit(rng) * (i + 1)));
    // Mostly local edges, so the graph looks like a network (chains with skips and branches).
    if (unit(rng) < 0.7) reads.insert(i);
    for (int v : reads) p.values[v].consumers.push_back(i);
    p.values.push_back({"v" + std::to_string(i), i, {}, false, bytes(rng)});
  }
  p.values.back().output = true;
  // Values nobody reads become extra outputs.
  for (auto& v : p.values)
    if (v.consumers.empty()) v.output = true;
  p.source = 0;
  p.sink = k - 1;
  if (memory)
    for (int d = 0; d < k; ++d) p.memory_bytes[d] = 700.0 * n / k + 500 * unit(rng);
  p.check();
  return p;
}

void expect_same_cost(const PlanCost& a, const PlanCost& b, PartitionObjective o,
                      const std::string& what) {
  ASSERT_TRUE(a.valid) << what << ": " << a.why_invalid;
  ASSERT_TRUE(b.valid) << what;
  const double x = o == PartitionObjective::kLatency ? a.latency_ms : a.bottleneck_ms;
  const double y = o == PartitionObjective::kLatency ? b.latency_ms : b.bottleneck_ms;
  EXPECT_NEAR(x, y, 1e-9 * std::max(1.0, y)) << what;
}

TEST(Partition, EvaluateCountsEveryCrossingOnceAndEachLinkLatencyOnce) {
  // in → a → b → c (out); a also feeds c (a skip). Two devices, link 1 MB/s, 2 ms.
  PartitionProblem p;
  p.model = "skip";
  p.devices = {"edge", "cloud"};
  p.memory_bytes = {1e9, 1e9};
  p.links = {{1e6, 2}};
  p.sink = 1;
  for (const char* n : {"a", "b", "c"}) p.nodes.push_back({n, "Op", {1, 2}, 100});
  p.values = {{"input", -1, {0}, false, 1000},
              {"a", 0, {1, 2}, false, 4000},
              {"b", 1, {2}, false, 2000},
              {"c", 2, {}, true, 500}};
  const PlanCost c = evaluate(p, {0, 1, 1});
  ASSERT_TRUE(c.valid);
  // a crosses once although two nodes read it on the cloud: 4000 B = 4 ms + 2 ms latency.
  EXPECT_DOUBLE_EQ(c.forward_bytes[0], 4000);
  EXPECT_DOUBLE_EQ(c.forward_ms[0], 6);
  EXPECT_DOUBLE_EQ(c.device_ms[0], 1);
  EXPECT_DOUBLE_EQ(c.device_ms[1], 4);
  EXPECT_DOUBLE_EQ(c.latency_ms, 11);
  EXPECT_DOUBLE_EQ(c.bottleneck_ms, 4);
  // Everything on the edge: the output travels to the cloud.
  EXPECT_DOUBLE_EQ(evaluate(p, {0, 0, 0}).forward_bytes[0], 500);
  // c on the edge reading b from the cloud runs backwards.
  EXPECT_FALSE(evaluate(p, {0, 1, 0}).valid);
  // Results going back to the edge use the backward direction.
  p.sink = 0;
  const PlanCost back = evaluate(p, {0, 1, 1});
  EXPECT_DOUBLE_EQ(back.backward_bytes[0], 500);
  EXPECT_DOUBLE_EQ(back.latency_ms, 1 + 6 + 4 + 2.5);
}

TEST(Partition, CutSetProgrammeEqualsBruteForceOnRandomDags) {
  std::mt19937 rng(7);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int k = 2 + trial % 3;
    const int n = k == 4 ? 9 : k == 3 ? 11 : 16;
    auto p = random_problem(rng, n, k, trial % 4 == 3);
    if (trial % 5 == 1) p.sink = 0;  // results return to the camera
    if (trial % 7 == 2 && k > 2) p.source = 1;
    for (auto o : {PartitionObjective::kLatency, PartitionObjective::kThroughput}) {
      const auto brute = brute_force_plan(p, o);
      if (!brute.best.cost.valid) {
        EXPECT_THROW(solve_partition(p, o), InputError);
        continue;
      }
      const auto dp = solve_partition(p, o);
      expect_same_cost(
          dp.cost, brute.best.cost, o,
          "trial " + std::to_string(trial) + " " + objective_name(o) + " k=" + std::to_string(k));
      if (o == PartitionObjective::kThroughput)
        EXPECT_NEAR(dp.cost.latency_ms, brute.best.cost.latency_ms,
                    1e-9 * brute.best.cost.latency_ms)
            << "ties on the bottleneck are broken by latency";
      ++checked;
    }
  }
  EXPECT_GT(checked, 60);
}

TEST(Partition, MinCutEqualsEnumerationOnTwoDevices) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 25; ++trial) {
    const auto p = random_problem(rng, 12 + trial % 9, 2);  // up to 20 nodes
    const auto cut = min_cut_plan(p);
    const auto brute = brute_force_plan(p, PartitionObjective::kLatency);
    expect_same_cost(cut.cost, brute.best.cost, PartitionObjective::kLatency,
                     "trial " + std::to_string(trial));
    EXPECT_EQ(cut.method, "min cut");
  }
}

TEST(Partition, ChainOfTwentyNodesOnFourDevices) {
  std::mt19937 rng(3);
  PartitionProblem p = random_problem(rng, 1, 4);
  // Rebuild as a pure chain of 20.
  p.nodes.clear();
  p.values = {{"input", -1, {0}, false, 6e5}};
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < 20; ++i) {
    p.nodes.push_back(
        {"c" + std::to_string(i), "Op", {8 * u(rng), 4 * u(rng), 2 * u(rng), u(rng)}, 0});
    p.values.push_back({"c" + std::to_string(i), i, {}, i == 19, 1e5 + 1e6 * u(rng)});
    if (i < 19) p.values.back().consumers = {i + 1};
  }
  p.check();
  EXPECT_EQ(count_cut_sets(p, 1000), 21);
  for (auto o : {PartitionObjective::kLatency, PartitionObjective::kThroughput}) {
    const auto brute = brute_force_plan(p, o);
    EXPECT_EQ(brute.assignments, 1771);  // C(20 + 3, 3) monotone splits
    expect_same_cost(solve_partition(p, o).cost, brute.best.cost, o, objective_name(o));
  }
}

TEST(Partition, BaselinesAreValidAndNeverBeatTheOptimum) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 10; ++trial) {
    const auto p = random_problem(rng, 12, 3);
    for (auto o : {PartitionObjective::kLatency, PartitionObjective::kThroughput}) {
      const auto best = solve_partition(p, o);
      const auto baselines = baseline_plans(p, o);
      ASSERT_EQ(baselines.size(), 4u);
      EXPECT_EQ(baselines[0].method, "all on d0");
      EXPECT_EQ(baselines[1].method, "all on d2");
      EXPECT_EQ(baselines[2].method, "best single split");
      EXPECT_EQ(baselines[3].method, "load balanced");
      for (const auto& b : baselines) {
        EXPECT_TRUE(b.cost.valid) << b.method << ": " << b.cost.why_invalid;
        EXPECT_FALSE(better(b.cost, best.cost, o)) << b.method;
      }
    }
  }
}

TEST(Partition, LoadBalancedSplitFollowsDeviceSpeed) {
  // Ten equal nodes; the second device is four times as fast: it should take about 8 of them.
  PartitionProblem p;
  p.model = "even";
  p.devices = {"slow", "fast"};
  p.memory_bytes = {1e18, 1e18};
  p.links = {{1e9, 0}};
  p.sink = 1;
  p.values.push_back({"input", -1, {0}, false, 10});
  for (int i = 0; i < 10; ++i) {
    p.nodes.push_back({"n" + std::to_string(i), "Op", {4, 1}, 0});
    p.values.push_back({"v" + std::to_string(i), i, {}, i == 9, 10});
    if (i < 9) p.values.back().consumers = {i + 1};
  }
  const auto plans = baseline_plans(p, PartitionObjective::kThroughput);
  const auto& lb = plans.back().assignment;
  EXPECT_EQ(std::count(lb.begin(), lb.end(), 0), 2);
  EXPECT_EQ(std::count(lb.begin(), lb.end(), 1), 8);
}

TEST(Partition, MemoryLimitsAreRespectedOrRefused) {
  std::mt19937 rng(9);
  auto p = random_problem(rng, 8, 2);
  for (auto& m : p.memory_bytes) m = 1;  // nothing fits anywhere
  for (auto& node : p.nodes) node.param_bytes = 10;
  EXPECT_THROW(solve_partition(p, PartitionObjective::kLatency), InputError);
}

TEST(PipelineSim, BackToBackFramesMatchTheClosedForm) {
  // device 4 ms, link 6 ms (+1 ms propagation), device 3 ms.
  std::vector<PipelineServer> s = {
      {"a", false, 4, 4, 0}, {"a → b", true, 6, 6, 1}, {"b", false, 3, 3, 0}};
  SimulationOptions o;
  o.frames = 10;
  const auto r = simulate_pipeline(s, o);
  EXPECT_DOUBLE_EQ(r.latency_ms[0], 4 + 6 + 1 + 3);
  for (int f = 0; f < 10; ++f) EXPECT_DOUBLE_EQ(r.done_ms[f], 14 + 6.0 * f) << f;
  EXPECT_NEAR(r.steady_fps, 1000.0 / 6, 1e-9);
  EXPECT_NEAR(r.servers[1].utilisation, 60.0 / r.makespan_ms, 1e-12);
  // Frames pile up at the first device (all wait at time 0) and before the slow link (one more
  // every 12 ms: frames 7, 8 and 9 at 40 ms), never after it.
  EXPECT_EQ(r.servers[0].max_queue, 9);
  EXPECT_EQ(r.servers[1].max_queue, 3);
  EXPECT_EQ(r.servers[2].max_queue, 0);
  // Arrivals slower than the bottleneck: no queue, every frame takes the first frame's latency.
  o.rate_fps = 50;
  const auto slow = simulate_pipeline(s, o);
  for (double l : slow.latency_ms) EXPECT_DOUBLE_EQ(l, 14);
  EXPECT_NEAR(slow.steady_fps, 50, 1e-9);
}

TEST(PipelineSim, FirstFrameLatencyEqualsThePlanLatency) {
  std::mt19937 rng(13);
  for (int trial = 0; trial < 10; ++trial) {
    const auto p = random_problem(rng, 10, 3);
    const auto plan = solve_partition(p, PartitionObjective::kLatency);
    SimulationOptions o;
    o.frames = 20;
    const auto r = simulate_pipeline(pipeline_servers(p, p, plan.assignment), o);
    EXPECT_NEAR(r.latency_ms[0], plan.cost.latency_ms, 1e-9 * plan.cost.latency_ms);
    EXPECT_NEAR(r.steady_fps, plan.cost.throughput_fps(), 1e-6 * plan.cost.throughput_fps());
  }
}

TEST(PipelineSim, ServersOnOneMachineShareItsCores) {
  // Two stages of 1 ms each, back to back. Each on its own machine: a frame every 1 ms. On one
  // core they share it while both run: frame 0 alone on a (0-1 ms), then frame 0 on b and frame
  // 1 on a at half speed each (1-3 ms), and so on: frame f done at 3 + 2f ms, but the last,
  // alone on b for its last 1 ms.
  std::vector<PipelineServer> s = {{"a", false, 1, 1, 0}, {"b", false, 1, 1, 0}};
  SimulationOptions o;
  o.frames = 10;
  for (int f = 0; f < o.frames; ++f)
    EXPECT_DOUBLE_EQ(simulate_pipeline(s, o).done_ms[f], 2.0 + f) << f;
  for (auto& v : s) {
    v.host = 0;
    v.cpu_first_ms = v.cpu_later_ms = 1;
  }
  o.host_cores = {1};
  const auto shared = simulate_pipeline(s, o);
  for (int f = 0; f + 1 < o.frames; ++f) EXPECT_NEAR(shared.done_ms[f], 3.0 + 2 * f, 1e-9) << f;
  EXPECT_NEAR(shared.done_ms.back(), 2.0 * o.frames, 1e-9);
  // A link of 3 ms, 1 ms of it CPU on the same core: that share stretches, the transmission
  // does not. Frame 0: a 0-1, the link's CPU 1-3 (beside frame 1 on a), its transmission 3-5.
  s = {{"a", false, 1, 1, 0}, {"a → b", true, 3, 3, 0.5}};
  s[0].host = s[1].host = 0;
  s[0].cpu_first_ms = s[0].cpu_later_ms = 1;
  s[1].cpu_first_ms = s[1].cpu_later_ms = 1;
  EXPECT_NEAR(simulate_pipeline(s, o).done_ms[0], 5.5, 1e-9);
  // Enough cores change nothing against servers on their own, on random chains too.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 5; ++trial) {
    const auto p = random_problem(rng, 10, 3);
    auto servers =
        pipeline_servers(p, p, solve_partition(p, PartitionObjective::kThroughput).assignment);
    o.host_cores.clear();
    const auto before = simulate_pipeline(servers, o);
    for (auto& v : servers) v.host = 0;
    o.host_cores = {static_cast<int>(servers.size())};
    const auto after = simulate_pipeline(servers, o);
    for (int f = 0; f < o.frames; ++f) EXPECT_NEAR(after.done_ms[f], before.done_ms[f], 1e-9);
  }
  o.host_cores = {0};
  EXPECT_THROW(simulate_pipeline(s, o), InputError);
}

TEST(PipelineSim, TinyCpuSharesLateInALongRunEnd) {
  // Shares of 1e-9 ms at times of 1e7 ms: what is left of one is too small to move the clock,
  // and it ends all the same (the simulation does not spin).
  std::vector<PipelineServer> s = {{"a", false, 1e-9, 1e-9, 0}, {"b", false, 1e-9, 1e-9, 0}};
  for (auto& v : s) {
    v.host = 0;
    v.cpu_first_ms = v.cpu_later_ms = 1e-9;
    v.background_ms = 3e-9;
  }
  SimulationOptions o;
  o.frames = 100;
  o.rate_fps = 0.01;
  o.host_cores = {1};
  const auto r = simulate_pipeline(s, o);
  EXPECT_NEAR(r.done_ms.back(), 99 * 1e5, 1e-3);
}

TEST(PipelineSim, AFrameThatFindsItsServerIdlePaysTheWakeUp) {
  // One server of 1 ms on a core of its own machine; a frame that finds it idle takes 0.5 ms
  // more. Back to back only the first does.
  std::vector<PipelineServer> s = {{"a", false, 1, 1, 0}};
  s[0].host = 0;
  s[0].cpu_first_ms = s[0].cpu_later_ms = 1;
  s[0].idle_ms = 0.5;
  SimulationOptions o;
  o.frames = 5;
  o.host_cores = {1};
  auto r = simulate_pipeline(s, o);
  for (int f = 0; f < o.frames; ++f) EXPECT_NEAR(r.done_ms[f], 1.5 + f, 1e-9) << f;
  // Frames 10 ms apart: every one finds it idle.
  o.rate_fps = 100;
  r = simulate_pipeline(s, o);
  for (double l : r.latency_ms) EXPECT_NEAR(l, 1.5, 1e-9);
  // Frame 1 is idle for 8.5 ms (10 less frame 0's 1.5) of the 17 after which a frame pays all
  // of it: half. Each later one for 10 less the one before's latency l: l = 1 + 0.5 (10 - l) / 17,
  // 44/35 ms.
  s[0].idle_full_ms = 17;
  r = simulate_pipeline(s, o);
  EXPECT_NEAR(r.latency_ms[0], 1.5, 1e-9);  // the first: idle since ever
  EXPECT_NEAR(r.latency_ms[1], 1.25, 1e-9);
  EXPECT_NEAR(r.latency_ms.back(), 44.0 / 35, 1e-5);
  // Without a host the wait is added to the service all the same.
  s[0].host = -1;
  s[0].idle_full_ms = 0;
  o.host_cores.clear();
  r = simulate_pipeline(s, o);
  for (double l : r.latency_ms) EXPECT_NEAR(l, 1.5, 1e-9);
}

TEST(PipelineSim, WorkAFrameLeavesBehindSharesTheCoresWithoutHoldingTheFrame) {
  // a (1 ms) leaves 1 ms of work behind on the single core b (1 ms) runs on too. Frame 0 alone:
  // a 0-1, then b and the work left behind share the core: b's 1 ms ends at 3. Without the work
  // left behind, 2.
  std::vector<PipelineServer> s = {{"a", false, 1, 1, 0}, {"b", false, 1, 1, 0}};
  for (auto& v : s) {
    v.host = 0;
    v.cpu_first_ms = v.cpu_later_ms = 1;
  }
  SimulationOptions o;
  o.frames = 1;
  o.host_cores = {1};
  EXPECT_NEAR(simulate_pipeline(s, o).done_ms[0], 2, 1e-9);
  s[0].background_ms = 1;
  EXPECT_NEAR(simulate_pipeline(s, o).done_ms[0], 3, 1e-9);
  // On two cores it takes the other one: no slower than without.
  o.host_cores = {2};
  EXPECT_NEAR(simulate_pipeline(s, o).done_ms[0], 2, 1e-9);
  // Back to back on one core the frames pay for all the work: 3 ms a frame in the steady state.
  o.host_cores = {1};
  o.frames = 40;
  EXPECT_NEAR(simulate_pipeline(s, o).steady_fps, 1000.0 / 3, 1000.0 / 3 * 0.02);
}

TEST(Partition, PerMessageWorkHoldsTheLinkAndCountsOncePerMessage) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 6; ++trial) {
    auto p = random_problem(rng, 9, trial % 2 ? 3 : 2);
    for (auto& l : p.links) l.message_ms = 2.5;
    const auto a = Assignment(p.nodes.size(), 0);
    const auto c = evaluate(p, a);
    for (size_t l = 0; l < p.links.size(); ++l)
      if (c.forward_bytes[l] > 0)
        EXPECT_NEAR(
            c.forward_ms[l],
            p.links[l].latency_ms + 2.5 + 1000.0 * c.forward_bytes[l] / p.links[l].bandwidth, 1e-9);
    // Exact against enumeration with the per-message work, min cut (two devices) included.
    for (auto objective : {PartitionObjective::kLatency, PartitionObjective::kThroughput}) {
      const auto best = brute_force_plan(p, objective).best;
      const auto dp = solve_partition(p, objective);
      EXPECT_NEAR(
          objective == PartitionObjective::kLatency ? dp.cost.latency_ms : dp.cost.bottleneck_ms,
          objective == PartitionObjective::kLatency ? best.cost.latency_ms
                                                    : best.cost.bottleneck_ms,
          1e-9 * best.cost.latency_ms)
          << trial;
    }
  }
  // A message that costs more than any stage keeps the model on one device.
  auto p = random_problem(rng, 6, 2);
  p.links[0].message_ms = 1e6;
  const auto plan = solve_partition(p, PartitionObjective::kLatency);
  EXPECT_TRUE(plan.assignment == Assignment(p.nodes.size(), 0) ||
              plan.assignment == Assignment(p.nodes.size(), 1));
}

TEST(PipelineSim, GanttChartIsARealImage) {
  std::vector<PipelineServer> s = {{"camera", false, 4, 4, 0}, {"camera → cloud", true, 6, 2, 1}};
  SimulationOptions o;
  o.frames = 4;
  const auto chart = gantt_chart(s, simulate_pipeline(s, o), "test");
  EXPECT_EQ(chart.bars.size(), 8u);
  const std::string png = tools::gantt_png(chart);
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  EXPECT_NE(tools::gantt_svg(chart).find("<svg"), std::string::npos);
}

TEST(DevicesFile, ReadsAChainAndRefusesMistakes) {
  const auto dir = partition_folder("devices");
  auto write = [&](const std::string& text) {
    std::ofstream(dir / "d.yaml") << text;
    return dir / "d.yaml";
  };
  const auto d = load_devices_file(
      write("devices:\n  - {name: camera, speed: 0.25, memory_mb: 64}\n  - {name: edge}\n"
            "  - {name: cloud, speed: 8}\nlinks:\n  - {bandwidth_mb_s: 6.3, latency_ms: 2}\n"
            "  - {bandwidth_mb_s: 0.68}\nresults_to: edge\n"));
  ASSERT_EQ(d.devices.size(), 3u);
  EXPECT_DOUBLE_EQ(d.devices[0].speed, 0.25);
  EXPECT_DOUBLE_EQ(d.devices[0].memory_bytes, 64e6);
  EXPECT_TRUE(std::isinf(d.devices[1].memory_bytes));
  EXPECT_DOUBLE_EQ(d.links[0].bandwidth, 6.3e6);
  EXPECT_DOUBLE_EQ(d.links[1].latency_ms, 0);
  EXPECT_EQ(d.source, 0);
  EXPECT_EQ(d.sink, 1);
  auto error = [&](const std::string& text) {
    try {
      load_devices_file(write(text));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("devices:\n  - {name: a, sped: 2}\n").find("did you mean speed"),
            std::string::npos)
      << error("devices:\n  - {name: a, sped: 2}\n");
  EXPECT_NE(error("devices:\n  - {name: a}\n  - {name: b}\n").find("must list the 1 links"),
            std::string::npos);
  EXPECT_NE(error("devices:\n  - {name: a}\n  - {name: a}\nlinks: [{bandwidth_mb_s: 1}]\n")
                .find("used twice"),
            std::string::npos);
  EXPECT_NE(error("devices:\n  - {name: a}\n  - {name: b}\nlinks: [{bandwidth_mb_s: 0}]\n")
                .find("must be above 0"),
            std::string::npos);
  EXPECT_NE(error("devices:\n  - {name: a, speed: .nan}\n").find("finite"), std::string::npos);
  EXPECT_NE(error("devices:\n  - {name: a}\n  - {name: b}\n"
                  "links: [{bandwidth_mb_s: 1, message_ms: -1}]\n")
                .find("message_ms must be a finite number of 0 or more"),
            std::string::npos);
  EXPECT_DOUBLE_EQ(load_devices_file(write("devices:\n  - {name: a}\n  - {name: b}\n"
                                           "links: [{bandwidth_mb_s: 1, message_ms: 0.3}]\n"))
                       .links[0]
                       .message_ms,
                   0.3);
  EXPECT_NE(error("devices:\n  - {name: a}\nresults_to: b\n").find("names no device 'b'"),
            std::string::npos);
  EXPECT_NE(error("devices:\n  - {name: a, costs: nofile.json}\n").find("no cost file"),
            std::string::npos);
}

TEST(LayerCosts, IntegerCostsAreCachedApartAndReadBackFromTheWritersFile) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  const auto forward = [m](const at::Tensor& x) { return m->forward(x); };
  const auto dir = partition_folder("costs_int8");
  bool cached = true;
  const auto int8 = cached_layer_costs(*m, g, forward, dir, &cached, /*int8=*/true);
  EXPECT_FALSE(cached);
  EXPECT_EQ(int8.runtime, "INT8 inference form");
  const auto again = cached_layer_costs(*m, g, forward, dir, &cached, /*int8=*/true);
  EXPECT_TRUE(cached);
  EXPECT_EQ(again.runtime, "INT8 inference form");
  EXPECT_EQ(again.ms, int8.ms);
  // The float form's costs are another entry, not the integer ones.
  const auto fp32 = cached_layer_costs(*m, g, forward, dir, &cached, /*int8=*/false);
  EXPECT_FALSE(cached);
  EXPECT_EQ(fp32.runtime, "inference form");
}

TEST(LayerCosts, RoundTripAndMismatchIsRefused) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  LayerCosts c;
  c.model = "resnet20_cifar";
  c.fingerprint = graph_fingerprint(g);
  c.input = g.input_shape();
  c.machine = this_machine();
  for (const auto& op : g.ops()) c.ms[op.name] = 0.5;
  const auto dir = partition_folder("costs");
  write_layer_costs(c, dir / "c.json");
  const auto back = read_layer_costs(dir / "c.json");
  EXPECT_EQ(back.ms, c.ms);
  EXPECT_EQ(back.fingerprint, c.fingerprint);
  EXPECT_NO_THROW(check_layer_costs(back, g, "c.json"));
  auto missing = back;
  missing.ms.erase(g.ops().back().name);
  EXPECT_THROW(check_layer_costs(missing, g, "c.json"), InputError);
  std::ofstream(dir / "bad.json") << "{\"format\": \"igb layer costs\", \"version\": 1, "
                                     "\"model\": \"m\", \"input\": [1], \"ops\": {\"a\": -1}}";
  EXPECT_THROW(read_layer_costs(dir / "bad.json"), InputError);
  // Malformed JSON, a missing key, a cost beyond a double: one line in our words, no library tag.
  const auto refused = [&](const std::string& text) {
    std::ofstream(dir / "worse.json") << text;
    try {
      read_layer_costs(dir / "worse.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = "{\"format\": \"igb layer costs\", \"version\": 1, ";
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"{\"format\": ", "is not a layer cost file: parse error"},
           {head + "\"input\": [1], \"ops\": {}}", "is not a layer cost file: key 'model'"},
           {head + "\"model\": \"m\", \"input\": [1], \"ops\": {\"a\": 1e400}}",
            "is not a layer cost file: number overflow parsing '1e400'"}}) {
    const std::string what = refused(text);
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find("json.exception"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // A thinned model is another graph.
  auto other = make("resnet32_cifar");
  EXPECT_NE(graph_fingerprint(graph_of(other, "resnet32_cifar")), c.fingerprint);
}

// A devices file's chain: a device with a cost file gets that file's costs, the devices without
// one share a single measurement of this machine (logged once), and a cost file of another graph
// is refused naming the file.
TEST(LayerCosts, EachDeviceGetsItsCostFileOrOneSharedMeasurement) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  const auto forward = [m](const at::Tensor& x) { return m->forward(x); };
  const auto dir = partition_folder("device_costs");
  LayerCosts edge;
  edge.model = "resnet20_cifar";
  edge.fingerprint = graph_fingerprint(g);
  edge.input = g.input_shape();
  edge.machine = "edge box";
  double ms = 0.125;
  for (const auto& op : g.ops()) edge.ms[op.name] = (ms += 0.25);
  write_layer_costs(edge, dir / "edge.json");
  DevicesFile devices;
  devices.devices = {{"camera", {}, 1.0}, {"edge", dir / "edge.json", 1.0}, {"cloud", {}, 1.0}};
  devices.links = {{1e6, 1}, {1e6, 1}};
  devices.sink = 2;
  Logger logger;
  logger.set_quiet(true);
  logger.open_file(dir / "log.txt");
  const auto costs = device_layer_costs(devices, *m, g, forward, (dir / "cache").string(), logger);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[1].ms, edge.ms);
  EXPECT_EQ(costs[1].machine, "edge box");
  EXPECT_EQ(costs[0].runtime, "inference form");
  EXPECT_EQ(costs[0].machine, this_machine());
  EXPECT_EQ(costs[0].ms.size(), g.ops().size());
  EXPECT_EQ(costs[2].ms, costs[0].ms);
  const std::string log = read_text_file(dir / "log.txt");
  const std::string measured = "measured per-op costs of resnet20_cifar (inference form) on ";
  const auto line = log.find(measured);
  ASSERT_NE(line, std::string::npos) << log;
  EXPECT_EQ(log.find("per-op costs", line + measured.size()), std::string::npos) << log;
  // Measured once and cached: the next chain reads the cache.
  const auto again = device_layer_costs(devices, *m, g, forward, (dir / "cache").string(), logger);
  EXPECT_EQ(again[0].ms, costs[0].ms);
  EXPECT_NE(read_text_file(dir / "log.txt").find("read cached per-op costs of resnet20_cifar"),
            std::string::npos);

  // The costs of another model at the same input: resnet20_cifar's ops are not in them.
  auto vgg = make("vgg11_cifar");
  const auto vgg_graph = graph_of(vgg, "vgg11_cifar");
  ASSERT_EQ(vgg_graph.input_shape(), g.input_shape());
  LayerCosts other;
  other.model = "vgg11_cifar";
  other.fingerprint = graph_fingerprint(vgg_graph);
  other.input = vgg_graph.input_shape();
  for (const auto& op : vgg_graph.ops()) other.ms[op.name] = 1;
  write_layer_costs(other, dir / "vgg.json");
  devices.devices[1].costs = dir / "vgg.json";
  const std::string refused = test::input_error_of(
      [&] { device_layer_costs(devices, *m, g, forward, (dir / "cache").string(), logger); });
  EXPECT_EQ(refused.find((dir / "vgg.json").string() + " has no cost for op '"), 0u) << refused;
  EXPECT_NE(refused.find("' of resnet20_cifar (measured for vgg11_cifar)"), std::string::npos)
      << refused;
}

TEST(TransferBytes, CsrIsChosenOnlyWhenSmaller) {
  const graph::Shape s = {1, 16, 8, 8};  // 1024 values, 128 rows of 8
  EXPECT_DOUBLE_EQ(dense_bytes(s, TransferPrecision::kFp32), 4096);
  EXPECT_DOUBLE_EQ(dense_bytes(s, TransferPrecision::kFp16), 2048);
  EXPECT_DOUBLE_EQ(dense_bytes(s, TransferPrecision::kInt8), 1032);
  EXPECT_DOUBLE_EQ(csr_bytes(s, 100, TransferPrecision::kFp32), 100 * 8 + 129 * 4);
  EXPECT_DOUBLE_EQ(encoded_bytes(s, 100, TransferPrecision::kFp32), 1316);
  EXPECT_DOUBLE_EQ(encoded_bytes(s, 1000, TransferPrecision::kFp32), 4096);
}

/// Costs for every op of `g` from its MACs (a stand-in for a measurement), scaled per device.
std::vector<LayerCosts> mac_costs(const graph::SummaryGraph& g, const std::vector<double>& scale) {
  std::vector<LayerCosts> out;
  for (double s : scale) {
    LayerCosts c;
    c.model = g.model_name();
    c.input = g.input_shape();
    for (const auto& op : g.ops())
      c.ms[op.name] = s * (1e-6 * static_cast<double>(g.macs(op.id)) + 0.01);
    out.push_back(c);
  }
  return out;
}

DevicesFile chain(int k) {
  DevicesFile d;
  const double bandwidth[] = {6.3e6, 4.5e6, 0.68e6};
  for (int i = 0; i < k; ++i) d.devices.push_back({"dev" + std::to_string(i), {}, 1.0});
  for (int i = 0; i + 1 < k; ++i) d.links.push_back({bandwidth[i % 3], 1});
  d.sink = k - 1;
  return d;
}

TEST(Partition, ZooModelsEqualBruteForce) {
  // FSRCNN (a chain) and ResNet-20 (residual blocks) on 3 devices.
  for (const auto& [name, k] : {std::pair<std::string, int>{"fsrcnn", 3}, {"resnet20_cifar", 3}}) {
    auto m = make(name);
    const auto g = graph_of(m, name);
    ModelPartitionInputs in;
    in.costs = mac_costs(g, {4, 1, 0.2});
    in.costs.resize(k);
    const auto p = partition_problem(g, chain(k), in);
    for (auto o : {PartitionObjective::kLatency, PartitionObjective::kThroughput}) {
      const auto brute = brute_force_plan(p, o);
      expect_same_cost(solve_partition(p, o).cost, brute.best.cost, o, name);
    }
  }
}

// Memory limits that hold no assignment are refused before any cost exists (every cost zero):
// a chain too small for the model, and one whose sum covers it but whose every device is
// smaller than ResNet-20's largest convolution.
TEST(Partition, MemoryLimitsThatHoldNoAssignmentAreRefusedBeforeCosts) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  ModelPartitionInputs in;
  in.costs = mac_costs(g, {1, 1, 1});
  double total = 0, largest = 0;
  for (const auto& n : partition_problem(g, chain(3), in).nodes) {
    total += n.param_bytes;
    largest = std::max(largest, static_cast<double>(n.param_bytes));
  }
  ASSERT_DOUBLE_EQ(largest, 4.0 * 64 * 64 * 9);
  auto refusal = [&](const DevicesFile& d) {
    try {
      check_memory_fits(g, d);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  DevicesFile d = chain(3);
  EXPECT_EQ(refusal(d), "");  // no limits
  d.devices[0].memory_bytes = d.devices[1].memory_bytes = 0;
  d.devices[2].memory_bytes = total;
  EXPECT_EQ(refusal(d), "");  // the whole model on the last device
  d.devices[2].memory_bytes = total - 4;
  EXPECT_EQ(refusal(d).find("resnet20_cifar (1.08 MB of parameters) fits no assignment to the "
                            "chain: the devices' memory limits add up to 1.08 MB"),
            0u)
      << refusal(d);
  EXPECT_EQ(refusal(d).find("no split"), std::string::npos);
  const int k = static_cast<int>(std::ceil(total / (0.9 * largest))) + 1;
  d = chain(k);
  for (auto& device : d.devices) device.memory_bytes = 0.9 * largest;
  EXPECT_NE(refusal(d).find("and no split of the model along the chain fits them"),
            std::string::npos)
      << refusal(d);
  for (auto& device : d.devices) device.memory_bytes = 1.5 * largest;
  EXPECT_EQ(refusal(d), "");  // each device holds a convolution and its BatchNorm: a split exists
}

/// A plan file of resnet20_cifar's optimal plan and its baselines on three devices.
PlanFile resnet20_plan_file(const graph::SummaryGraph& g) {
  ModelPartitionInputs in;
  in.costs = mac_costs(g, {4, 1, 0.2});
  const auto p = partition_problem(g, chain(3), in);
  PlanFile file;
  file.model = "resnet20_cifar";
  file.input = g.input_shape();
  file.devices_file = "chain.yaml";
  file.objective = "throughput";
  file.transfer = "fp16";
  file.mode = "diff";
  const auto best = solve_partition(p, PartitionObjective::kThroughput);
  file.plans.push_back(plan_file_entry(p, best));
  for (const auto& b : baseline_plans(p, PartitionObjective::kThroughput))
    file.plans.push_back(plan_file_entry(p, b));
  SimulationOptions so;
  so.frames = 12;
  so.rate_fps = 50;
  file.simulation =
      plan_file_simulation(so, simulate_pipeline(pipeline_servers(p, p, best.assignment), so));
  return file;
}

TEST(PlanFile, RoundTripGivesTheSameFileAndAssignment) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  ModelPartitionInputs in;
  in.costs = mac_costs(g, {4, 1, 0.2});
  const auto best =
      solve_partition(partition_problem(g, chain(3), in), PartitionObjective::kThroughput);
  const auto file = resnet20_plan_file(g);
  ASSERT_GE(file.plans.size(), 3u);
  const auto dir = partition_folder("plan_file");
  write_plan_file(file, dir / "plan.json");
  const auto back = read_plan_file(dir / "plan.json");
  EXPECT_EQ(plan_file_json(back), plan_file_json(file));
  EXPECT_EQ(back.source, dir / "plan.json");
  EXPECT_EQ(back.assignment(g), best.assignment);
  EXPECT_EQ(back.device_names(), (std::vector<std::string>{"dev0", "dev1", "dev2"}));
  EXPECT_EQ(back.simulation.frames, 12);
  EXPECT_EQ(back.simulation.servers.size(), file.simulation.servers.size());
  // The devices file is looked for beside the plan when it is not where it was given.
  EXPECT_EQ(back.devices_path(), dir / "chain.yaml");
  const auto j = nlohmann::json::parse(read_text_file(dir / "plan.json"));
  EXPECT_EQ(j["format"], "igb partition plan");
  EXPECT_EQ(j["version"], 1);
  // A file written before the format and version were recorded is read as version 1.
  auto old = j;
  old.erase("format");
  old.erase("version");
  EXPECT_EQ(plan_file_json(plan_file_from_json(old, "old.json")), j);
}

TEST(PlanFile, MalformedFilesAreRefusedInOneLineNamingTheKey) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  const auto good = plan_file_json(resnet20_plan_file(g));
  const auto refused = [](const nlohmann::json& j) {
    try {
      plan_file_from_json(j, "p.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  auto j = good;
  j["version"] = 2;
  EXPECT_EQ(refused(j), "p.json: plan.version is 2; this igb reads version 1");
  j = good;
  j["format"] = "igb layer costs";
  EXPECT_NE(refused(j).find("plan.format must be \"igb partition plan\""), std::string::npos);
  j = good;
  j.erase("model");
  EXPECT_EQ(refused(j), "p.json: plan.model is missing");
  j = good;
  j["plans"][0]["devices"][1]["ops"] = "conv1";
  EXPECT_EQ(refused(j), "p.json: plan.plans[0].devices[1].ops must be a list");
  j = good;
  j["plans"][0]["latency_ms"] = "fast";
  EXPECT_EQ(refused(j), "p.json: plan.plans[0].latency_ms must be a number");
  j = good;
  j["plans"][0]["links"].erase(0);
  EXPECT_NE(refused(j).find("plan.plans[0].links must hold one link fewer than devices (3)"),
            std::string::npos);
  j = good;
  j["plans"] = nlohmann::json::array();
  EXPECT_EQ(refused(j), "p.json: plan.plans is empty");
  EXPECT_EQ(refused(nlohmann::json::array()), "p.json: plan must be a JSON object");
  // Ops the graph does not have, and ops on no device.
  auto file = plan_file_from_json(good, "p.json");
  file.plans[0].devices[0].ops.push_back("nonesuch");
  try {
    file.assignment(g);
    ADD_FAILURE() << "an unknown op was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'nonesuch' of device dev0 is not an op of"),
              std::string::npos);
  }
  file = plan_file_from_json(good, "p.json");
  for (auto& d : file.plans[0].devices)
    if (!d.ops.empty()) {
      d.ops.erase(d.ops.begin());
      break;
    }
  try {
    file.assignment(g);
    ADD_FAILURE() << "an op on no device was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is on no device of the plan"), std::string::npos);
  }
  // Text that is not JSON names the file in our words.
  const auto dir = partition_folder("plan_bad");
  write_text_atomically(dir / "plan.json", "{\"model\": ");
  try {
    read_plan_file(dir / "plan.json");
    ADD_FAILURE() << "text that is not JSON was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("plan.json: not JSON (parse error"), std::string::npos) << what;
    EXPECT_EQ(what.find("json.exception"), std::string::npos) << what;
  }
}

/// Splits `name` over 3 devices so that every device gets ops, and checks the chained stages
/// against the model: LibTorch bit for bit, onnxruntime within 1e-5 of the whole model's ONNX.
void check_stages(const std::string& name, bool ort) {
  torch::manual_seed(0);
  auto m = make(name);
  m->eval();
  // ResNet-18 on 64x64 frames: the same graph as at 224x224, a twelfth of the work.
  const auto g = name == "resnet18" ? graph_of(m, name, {1, 3, 64, 64}) : graph_of(m, name);
  const int n = static_cast<int>(g.ops().size());
  Assignment a(n);
  for (int i = 0; i < n; ++i) a[i] = i < n / 3 ? 0 : i < 2 * n / 3 ? 1 : 2;
  const auto stages = split_stages(g, a, {"camera", "edge", "cloud"});
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_GE(stages[1].inputs.size(), 1u);
  const auto x = torch::rand(g.input_shape());
  torch::NoGradGuard no_grad;
  const auto whole = m->forward(x);
  const auto chained = run_stages(g, stages, x);
  EXPECT_TRUE(torch::equal(whole, chained)) << name;
  // The same stages in their inference forms (what igb-serve's workers run): within float
  // rounding of the model, every stage compiled; at another batch, the trace's replay.
  std::vector<std::unique_ptr<StageRunner>> forms;
  for (const auto& s : stages) forms.push_back(std::make_unique<StageRunner>(g, s, true));
  for (int64_t batch : {int64_t{1}, int64_t{2}}) {
    auto shape = g.input_shape();
    shape[0] = batch;
    const auto xb = batch == 1 ? x : torch::rand(shape);
    std::map<int, at::Tensor> values{{g.inputs().at(0), xb}};
    for (const auto& f : forms) f->run(values);
    const auto ref = m->forward(xb);
    const auto out = values.at(g.outputs().at(0));
    EXPECT_LE((out - ref).abs().max().item<double>(), 1e-5 * ref.abs().max().item<double>())
        << name << " batch " << batch;
  }
  if (!ort) return;
  const auto dir = partition_folder(name);
  const auto manifest = export_stages(*m, g, stages, OnnxExportOptions(), dir / "stages");
  ASSERT_EQ(manifest["stages"].size(), 3u);
  std::map<std::string, at::Tensor> values{{"input", x}};
  try {
    for (const auto& s : manifest["stages"]) {
      std::vector<std::pair<std::string, at::Tensor>> ins;
      for (const auto& i : s["inputs"]) {
        const auto in_name = i["name"].get<std::string>();
        ins.emplace_back(in_name, values.at(in_name));
      }
      OnnxRuntimeRunner ort_stage(dir / "stages" / s["file"].get<std::string>(),
                                  dir / ("work" + s["stage"].dump()));
      for (auto& [out_name, t] : ort_stage.run_named(ins)) values[out_name] = t;
    }
  } catch (const InputError& e) {
    FAIL() << e.what();
  }
  ASSERT_TRUE(values.count("output"));
  const double scale = whole.abs().max().item<double>();
  EXPECT_LT((values["output"] - whole).abs().max().item<double>(), 1e-5 * std::max(1.0, scale))
      << name;
}

TEST(Stages, ChainedStagesEqualTheModelForAChain) { check_stages("vgg11_cifar", true); }
TEST(Stages, ChainedStagesEqualTheModelForAResidualNet) { check_stages("resnet18", true); }
TEST(Stages, ChainedStagesEqualTheModelForAConcatNet) { check_stages("densenet_cifar", true); }

TEST(Stages, CrossingTensorsOfAResidualCut) {
  auto m = make("resnet20_cifar");
  const auto g = graph_of(m, "resnet20_cifar");
  // Cut inside the first residual block, after its first conv: the block's input (the skip) and
  // the conv's output both cross.
  const int conv = g.index("layer1.0.conv1");
  Assignment a(g.ops().size(), 1);
  for (int i = 0; i <= conv; ++i) a[i] = 0;
  const auto stages = split_stages(g, a, {"edge", "cloud"});
  std::vector<std::string> names;
  for (int v : stages[1].inputs) names.push_back(onnx_value_name(g, v));
  EXPECT_EQ(names.size(), 2u) << join(names);
  EXPECT_NE(std::find(names.begin(), names.end(), "layer1.0.conv1"), names.end()) << join(names);
  // The same cut in the report of every cut: both tensors, 16x32x32 each, and their bytes.
  const auto cuts = cut_traffic(g, TransferPrecision::kFp16, nullptr);
  ASSERT_EQ(cuts.size(), g.ops().size() + 1);
  EXPECT_EQ(cuts.front().tensors, std::vector<std::string>{"input"});
  EXPECT_EQ(cuts.back().tensors, std::vector<std::string>{"output"});
  const auto& c = cuts[conv + 1];
  EXPECT_EQ(c.after, "layer1.0.conv1");
  EXPECT_EQ(c.tensors.size(), 2u);
  EXPECT_DOUBLE_EQ(c.fp32_bytes, 2 * 16 * 32 * 32 * 4);
  EXPECT_DOUBLE_EQ(c.int8_bytes, 2 * (16 * 32 * 32 + 8));
  EXPECT_DOUBLE_EQ(c.sent_bytes, c.fp16_bytes);  // no zeros measured: dense
}

TEST(TransferBytes, ZerosMeasuredOnFramesMakeReluOutputsSparse) {
  torch::manual_seed(0);
  auto m = make("resnet20_cifar");
  m->eval();
  const auto g = graph_of(m, "resnet20_cifar");
  std::vector<at::Tensor> frames;
  const auto base = torch::rand(g.input_shape());
  for (int f = 0; f < 3; ++f) frames.push_back(base.clone());
  frames[2].index_put_({0, 0, 0, 0}, 0.5);  // one pixel changes in the last frame
  const auto traffic = measure_traffic(g, frames);
  const int relu = g.index("relu");
  const auto& t = traffic.at(g.op(relu).outputs[0]);
  EXPECT_GT(t.zero_ratio, 0.2);  // a ReLU of a random network: many zeros
  EXPECT_LT(t.zero_ratio, 0.8);
  // Identical frames have all-zero differences but for what the changed pixel reaches.
  EXPECT_GT(t.diff_zero_ratio, 0.99);
  const auto& in = traffic.at(g.inputs()[0]);
  EXPECT_NEAR(in.diff_zero_ratio, 1 - 0.5 / 3072, 1e-9);
}

}  // namespace
}  // namespace igb::deploy
