// How long the exact partition planner takes: for each model, its summary graph on 2, 3 and 4
// devices (costs from the ops' MACs scaled per device, the video pipeline's link figures), the
// cut-set programme for latency and for throughput (median of `repeat`), against the peer in the
// same run: one forward pass of the same model on this machine. The ratio says how many forward
// passes a plan costs. Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/host.h"
#include "core/table.h"
#include "deploy/partition/partition_solver.h"
#include "graph/summary_graph.h"
#include "models/model.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(int repeat, const F& f) {
  std::vector<double> t;
  for (int i = 0; i < repeat; ++i) {
    const auto t0 = Clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return median(t);
}

/// The planner's problem for `g` on `k` devices: device d runs an op in MACs / (1 GMAC/s · speed)
/// plus 0.01 ms, speeds 0.1, 1, 10, 30; links 6.3, 4.5, 0.68 MB/s.
igb::deploy::PartitionProblem problem_of(const igb::graph::SummaryGraph& g, int k) {
  const double speed[] = {0.1, 1, 10, 30};
  const double bandwidth[] = {6.3e6, 4.5e6, 0.68e6};
  igb::deploy::PartitionProblem p;
  p.model = g.model_name();
  for (int d = 0; d < k; ++d) {
    p.devices.push_back("d" + std::to_string(d));
    p.memory_bytes.push_back(std::numeric_limits<double>::infinity());
  }
  for (int l = 0; l + 1 < k; ++l) p.links.push_back({bandwidth[l], 1});
  p.sink = k - 1;
  for (const auto& op : g.ops()) {
    igb::deploy::PartitionNode n{op.name, op.type, {}, 0};
    for (int d = 0; d < k; ++d)
      n.cost_ms.push_back((1e-6 * static_cast<double>(g.macs(op.id)) + 0.01) / speed[d]);
    p.nodes.push_back(n);
  }
  const std::set<int> outputs(g.outputs().begin(), g.outputs().end());
  for (const auto& v : g.values()) {
    std::set<int> readers(v.consumers.begin(), v.consumers.end());
    if (readers.empty() && !outputs.count(v.id)) continue;
    p.values.push_back({std::to_string(v.id),
                        v.producer,
                        {readers.begin(), readers.end()},
                        outputs.count(v.id) > 0,
                        4.0 * static_cast<double>(igb::graph::volume(v.shape))});
  }
  return p;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Exact partition planning time against one forward pass");
  std::string models = "resnet50,vgg16,mobilenet_v2,densenet_cifar";
  int repeat = 5;
  int64_t threads = 2;
  app.add_option("--models", models, "Comma-separated zoo models")->capture_default_str();
  app.add_option("--repeat", repeat, "Timed runs (the median is reported)")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads of the forward pass")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (repeat < 1 || threads < 1) {
    std::cerr << "--repeat and --threads must be at least 1\n";
    return 2;
  }
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();
  igb::Table t;
  t.columns = {"Model",
               "Ops",
               "Cut sets",
               "Devices",
               "Latency plan (ms)",
               "Throughput plan (ms)",
               "Forward (ms)",
               "Plan / forward"};
  nlohmann::json rows = nlohmann::json::array();
  try {
    for (const auto& name : split(models)) {
      torch::manual_seed(0);
      auto model = igb::models::create_model(name, {});
      model->eval();
      const auto g = igb::graph::SummaryGraph::build(
          *model, model->input_shape(), [&](const torch::Tensor& x) { return model->forward(x); },
          name);
      const auto x = torch::rand(model->input_shape());
      torch::NoGradGuard no_grad;
      model->forward(x);
      const double forward = time_ms(repeat, [&] { model->forward(x); });
      for (int k = 2; k <= 4; ++k) {
        const auto p = problem_of(g, k);
        const int64_t sets = igb::deploy::count_cut_sets(p, 1'000'000);
        const double lat = time_ms(repeat, [&] {
          igb::deploy::solve_partition(p, igb::deploy::PartitionObjective::kLatency);
        });
        const double thr = time_ms(repeat, [&] {
          igb::deploy::solve_partition(p, igb::deploy::PartitionObjective::kThroughput);
        });
        t.rows.push_back({name, std::to_string(g.ops().size()), std::to_string(sets),
                          std::to_string(k), igb::fixed(lat, 2), igb::fixed(thr, 2),
                          igb::fixed(forward, 1), igb::fixed(std::max(lat, thr) / forward, 3)});
        rows.push_back({{"model", name},
                        {"ops", g.ops().size()},
                        {"cut_sets", sets},
                        {"devices", k},
                        {"latency_plan_ms", lat},
                        {"throughput_plan_ms", thr},
                        {"forward_ms", forward}});
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "partition_speed: " << e.what() << "\n";
    return 2;
  }
  std::cout << t.to_text() << "\n"
            << nlohmann::json{{"bench", "partition_speed"}, {"rows", rows}}.dump() << "\n";
  return 0;
}
