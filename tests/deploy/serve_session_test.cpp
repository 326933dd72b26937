// What igb-serve master decides, as a library does it without the CLI: the plan a lost worker
// leaves (failover_planner), what the simulator gives each stage to compute
// (simulated_compute_ms), and a ServeSession measuring, re-planning and serving a chain of
// in-process workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/logger.h"
#include "deploy/partition/partition_problem.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/stages.h"
#include "deploy/serve/serve_session.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/served_chain.h"
#include "tests/support.h"
#include "tests/tools/tools_support.h"

namespace igb::deploy {
namespace {

/// A chain of `speeds.size()` devices named `names` on fast links (10^8 B/s, 0.1 ms), the last the
/// results' sink, each op costing 0.01 ms and 1 ms per million MACs at speed 1.
ServedChain mac_chain(const graph::SummaryGraph& g, const std::vector<std::string>& names,
                      const std::vector<double>& speeds) {
  ServedChain chain;
  LayerCosts c;
  c.model = g.model_name();
  c.input = g.input_shape();
  for (const auto& op : g.ops()) c.ms[op.name] = 0.01 + 1e-6 * static_cast<double>(g.macs(op.id));
  for (size_t d = 0; d < names.size(); ++d) {
    chain.devices.devices.push_back({names[d], {}, speeds[d]});
    chain.costs.push_back(c);
    if (d > 0) chain.devices.links.push_back({1e8, 0.1});
  }
  chain.devices.sink = static_cast<int>(names.size()) - 1;
  return chain;
}

/// The first half of the ops (in order, so each stage reads only earlier ones) on device `first`,
/// the rest on `second`.
Assignment halves(const graph::SummaryGraph& g, int first, int second) {
  Assignment a(g.ops().size(), first);
  for (size_t i = a.size() / 2; i < a.size(); ++i) a[i] = second;
  return a;
}

/// The device names of a failover's stages, in chain order.
std::vector<std::string> stage_names(const Failover& f) {
  std::vector<std::string> out;
  for (const auto& st : f.stages) out.push_back(st.device_name);
  return out;
}

TEST(Failover, ALostDevicesOpsGoToTheSurvivorsOnTheirOptimalPlan) {
  auto m = tools::make("resnet20_cifar");
  const auto g = tools::graph_of(m, "resnet20_cifar");
  const std::vector<std::string> names = {"camera", "edge", "cloud"};
  // The edge is 16 times as fast as the camera and 8 times the cloud: the chain's plan runs
  // there.
  ServedChain chain = mac_chain(g, names, {0.5, 8, 1});
  const std::vector<std::string> workers = {"w0:1", "w1:2", "w2:3"};
  const auto planner =
      failover_planner(g, chain, {0, 1, 2}, names, PartitionObjective::kLatency, workers);
  const auto all = stage_names(planner({0, 1, 2}));
  EXPECT_NE(std::find(all.begin(), all.end(), "edge"), all.end());

  const Failover f = planner({0, 2});  // the edge's worker lost
  ASSERT_FALSE(f.stages.empty());
  ASSERT_EQ(f.workers.size(), f.stages.size());
  // Each stage on a surviving device, run by that device's worker; every op once.
  const auto reduced = chain_without(chain, {0, 2});
  Assignment a(g.ops().size(), -1);
  for (size_t k = 0; k < f.stages.size(); ++k) {
    const auto& st = f.stages[k];
    EXPECT_NE(st.device_name, "edge");
    EXPECT_EQ(f.workers[k], st.device_name == "camera" ? 0 : 2) << st.device_name;
    for (int op : st.ops) {
      EXPECT_EQ(a.at(static_cast<size_t>(op)), -1) << g.op(op).name;
      a.at(static_cast<size_t>(op)) = st.device;
    }
  }
  for (size_t i = 0; i < a.size(); ++i) ASSERT_GE(a[i], 0) << g.op(static_cast<int>(i)).name;
  // The survivors' optimum, as enumerating every assignment finds it.
  const auto problem = reduced.problem(g, true);
  const auto cost = evaluate(problem, a);
  const auto brute = brute_force_plan(problem, PartitionObjective::kLatency);
  ASSERT_TRUE(cost.valid) << cost.why_invalid;
  EXPECT_NEAR(cost.latency_ms, brute.best.cost.latency_ms, 1e-9 * brute.best.cost.latency_ms);
  std::string expected;
  for (const auto& st : f.stages)
    expected += (expected.empty() ? "" : ", ") + st.device_name + " on " +
                (st.device_name == "camera" ? "w0:1" : "w2:3") + ": " +
                std::to_string(st.ops.size()) + " ops";
  EXPECT_EQ(f.description, std::to_string(f.stages.size()) + " stages (" + expected + ")");

  // The planner reads the chain when a worker is lost: a cloud become slower than the camera
  // leaves the camera every op (the results still go to the cloud, the sink).
  chain.devices.devices[2].speed = 0.01;
  const Failover slow = planner({0, 2});
  EXPECT_EQ(stage_names(slow), std::vector<std::string>{"camera"});
  ASSERT_EQ(slow.stages.size(), 1u);
  EXPECT_EQ(slow.stages[0].ops.size(), g.ops().size());
  EXPECT_EQ(slow.workers, std::vector<int>{0});
  EXPECT_EQ(slow.description,
            "1 stages (camera on w0:1: " + std::to_string(g.ops().size()) + " ops)");
}

TEST(SimulatedCompute, EachDeviceComputesItsOpsCostsOrItsMeasuredCpuWhereLonger) {
  auto m = tools::make("resnet20_cifar");
  const auto g = tools::graph_of(m, "resnet20_cifar");
  const std::vector<std::string> names = {"camera", "edge", "cloud"};
  const std::vector<double> speeds = {0.5, 8, 2};
  ServedChain chain = mac_chain(g, names, speeds);
  const Assignment a = halves(g, 0, 2);  // the edge idle
  const auto stages = split_stages(g, a, names);
  ASSERT_EQ(stages.size(), 2u);
  // Each device's ops' costs over its speed, summed here from the cost tables.
  std::vector<double> expected(3, 0);
  for (size_t i = 0; i < a.size(); ++i) {
    const auto d = static_cast<size_t>(a[i]);
    expected[d] += chain.costs[d].ms.at(g.op(static_cast<int>(i)).name) / speeds[d];
  }
  ASSERT_GT(expected[0], 0);
  ASSERT_GT(expected[2], 0);
  auto ms = simulated_compute_ms(chain, g, a, stages);
  ASSERT_EQ(ms.size(), 3u);
  for (size_t d = 0; d < 3; ++d) EXPECT_NEAR(ms[d], expected[d], 1e-9 * (1 + expected[d])) << d;
  // Measured back to back: the camera's stage took longer than its costs say, the cloud's less.
  chain.serving.frames = 3;
  chain.serving.back_to_back.compute_cpu_ms = {expected[0] + 5, expected[2] / 2};
  ms = simulated_compute_ms(chain, g, a, stages);
  EXPECT_NEAR(ms[0], expected[0] + 5, 1e-9 * (1 + expected[0]));
  EXPECT_EQ(ms[1], 0);
  EXPECT_NEAR(ms[2], expected[2], 1e-9 * (1 + expected[2]));
}

// A session on two in-process workers: measured hosts and hops, one frame served before
// re-planning from the workers' reports, the rest served on the plan it configured, each output
// the model's.
TEST(ServeSession, MeasuresReplansAndServesAChainWithoutTheCli) {
  auto model = tools::make("resnet20_cifar");
  model->eval();
  const graph::SummaryGraph::Forward forward = [model](const at::Tensor& x) {
    return model->forward(x);
  };
  const auto graph = tools::graph_of(model, "resnet20_cifar");
  const std::vector<std::string> names = {"camera", "server"};
  const Assignment first = halves(graph, 0, 1);
  std::vector<std::unique_ptr<StageWorker>> workers;
  MasterOptions mo;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(std::make_unique<StageWorker>(*model, graph, forward, WorkerOptions()));
    mo.workers.push_back(workers.back()->start());
  }
  mo.weights = weights_digest(*model);
  torch::manual_seed(5);
  std::vector<at::Tensor> frames;
  for (int i = 0; i < 4; ++i) frames.push_back(torch::rand({1, 3, 32, 32}));
  test::TempDir tmp;
  Logger logger;
  logger.set_quiet(true);
  logger.open_file(tmp.path() / "log.txt");
  {
    ServeSession session(graph, mac_chain(graph, names, {0.5, 2}), first, names,
                         PartitionObjective::kLatency, mo);
    ASSERT_EQ(session.stages().size(), 2u);
    session.configure();
    const auto hops = session.measure_chain(2);
    // The master's hop to the first worker, the one between the workers, the results' way back.
    ASSERT_EQ(hops.size(), 3u);
    EXPECT_EQ(hops.front().from, "master");
    EXPECT_EQ(hops.back().to, "master");
    EXPECT_EQ(session.chain().stage_devices, (std::vector<int>{0, 1}));
    // One machine for the workers and the master (this process).
    EXPECT_EQ(session.chain().device_host, (std::vector<int>{0, 0}));
    EXPECT_EQ(session.chain().master_host, 0);

    const Replan next = session.replan(frames, 1, logger);
    EXPECT_EQ(frames.size(), 3u);
    EXPECT_NE(read_text_file(tmp.path() / "log.txt").find(next.summary()), std::string::npos);
    if (next.kept_for_empty_device) {
      EXPECT_EQ(session.assignment(), first);
      EXPECT_EQ(session.chain().devices.devices[0].speed, 0.5);
    } else {
      // The chain as the workers measured it: this machine's costs, speed 1.
      EXPECT_EQ(session.chain().devices.devices[0].speed, 1.0);
      EXPECT_EQ(session.chain().devices.devices[1].speed, 1.0);
      EXPECT_EQ(session.assignment(), next.changed ? next.assignment : first);
    }
    EXPECT_EQ(session.stages().size(), split_stages(graph, session.assignment(), names).size());

    const ServeResult result = session.serve(frames);
    ASSERT_EQ(result.outputs.size(), frames.size());
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < frames.size(); ++i) {
      const at::Tensor ref = model->forward(frames[i]);
      ASSERT_FALSE(result.outputs[i].empty()) << i;
      EXPECT_LE((result.outputs[i][0] - ref).abs().max().item<double>(), 1e-4) << i;
    }
    const auto predicted = session.simulate(3, 0);
    ASSERT_EQ(predicted.latency_ms.size(), 3u);
    const auto ms = session.simulated_compute_ms();
    EXPECT_EQ(ms,
              simulated_compute_ms(session.chain(), graph, session.assignment(), session.stages()));
  }
  for (auto& w : workers) w->shutdown();
}

}  // namespace
}  // namespace igb::deploy
