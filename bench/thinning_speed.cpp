// CPU inference latency of dense vs thinned models, in one run: each pair is built, the thinned
// one by running its schedule's pruning and thinning epoch (Li et al. VGG-16-A and ResNet-56-B),
// then timed in alternating blocks of forward passes (eval, no grad) of their inference forms
// (runtime/inference_model.h; --runtime eager: LibTorch's forward); medians are compared and the
// latency speed-up is set next to the MAC ratio. Prints a table and one JSON line per model.
#include <algorithm>
#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "compress/scheduler.h"
#include "core/host.h"
#include "core/table.h"
#include "graph/summary_graph.h"
#include "models/model.h"
#include "runtime/inference_model.h"
#include "runtime/width_search.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Side {
  igb::models::Model model;
  std::function<at::Tensor(const at::Tensor&)> run;
  int64_t macs = 0, params = 0;
  std::vector<double> ms;
};

Side build(const std::string& name, const std::string& schedule, bool inference,
           const igb::compress::WidthPolicy& width) {
  torch::manual_seed(0);
  Side s;
  s.model = igb::models::create_model(name, {});
  auto m = s.model;
  auto forward = [m](const torch::Tensor& x) { return m->forward(x); };
  if (!schedule.empty()) {
    auto sched = igb::compress::CompressionScheduler::from_file(schedule, *m, 0.1, nullptr);
    sched->set_tracer(m->input_shape(), forward);
    sched->set_thinning_width(width);
    torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.1));
    sched->on_epoch_begin(0, opt);
    sched->on_minibatch_begin({0, 0, 1}, opt);  // thinning acts at the epoch's first minibatch
  }
  m->eval();
  s.macs = igb::graph::SummaryGraph::build(*m, m->input_shape(), forward).total_macs();
  s.params = igb::models::count_parameters(*m);
  s.run = forward;
  if (inference) {
    auto form = igb::runtime::InferenceModel::make(m, forward, name);
    s.run = [form](const at::Tensor& x) { return form->forward(x); };
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Inference latency of dense vs thinned models (Li et al. pruned-A/B)");
  int64_t batch = 1, runs = 20, blocks = 7, threads = 2;
  std::string schedules = "schedules/classify";
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--runs", runs, "Forward passes per block")->capture_default_str();
  app.add_option("--blocks", blocks, "Alternating blocks per side")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--schedules", schedules, "Folder of the filter-rank schedules")
      ->capture_default_str();
  std::string runtime = "inference";
  app.add_option("--runtime", runtime, "inference (the inference form) or eager")
      ->capture_default_str()
      ->check(CLI::IsMember({"inference", "eager"}));
  std::string round_to = "1";
  app.add_option("--round-to", round_to,
                 "Thinning keeps zeroed channels so widths are multiples of N, or 'auto': the "
                 "width each layer runs fastest at (igb-tools thin --round-to)")
      ->capture_default_str()
      ->check([](const std::string& v) {
        return v == "auto" || (!v.empty() && v.size() <= 9 &&
                               v.find_first_not_of("0123456789") == std::string::npos &&
                               std::stoll(v) >= 1)
                   ? std::string()
                   : "a positive integer or auto";
      });
  CLI11_PARSE(app, argc, argv);
  igb::compress::WidthPolicy width;
  if (round_to == "auto")
    width = igb::runtime::fastest_widths();
  else if (std::stoll(round_to) > 1)
    width = igb::compress::round_to_multiple(std::stoll(round_to));
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"vgg16_cifar", schedules + "/vgg16_cifar_filter_rank.yaml"},
      {"resnet56_cifar", schedules + "/resnet56_filter_rank.yaml"}};
  igb::Table table;
  table.columns = {"Model",      "MACs dense",   "MACs thinned", "MAC ratio",
                   "Dense (ms)", "Thinned (ms)", "Speed-up",     "Speed-up / MAC ratio"};
  std::vector<nlohmann::json> lines;
  torch::NoGradGuard no_grad;
  for (const auto& [name, schedule] : cases) {
    const bool inference = runtime == "inference";
    Side dense = build(name, "", inference, {}), thin = build(name, schedule, inference, width);
    auto shape = dense.model->input_shape();
    shape[0] = batch;
    torch::manual_seed(1);
    const auto x = torch::randn(shape);
    for (auto* s : {&dense, &thin})
      for (int i = 0; i < 3; ++i) s->run(x);  // warm-up (and the inference form's plan)
    for (int64_t b = 0; b < blocks; ++b)
      for (auto* s : {&dense, &thin})
        for (int64_t r = 0; r < runs; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          s->run(x);
          s->ms.push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count());
        }
    const double md = median(dense.ms), mt = median(thin.ms);
    const double mac_ratio = static_cast<double>(dense.macs) / static_cast<double>(thin.macs);
    const double speedup = md / mt;
    table.rows.push_back({name, std::to_string(dense.macs), std::to_string(thin.macs),
                          igb::fixed(mac_ratio, 3), igb::fixed(md, 3), igb::fixed(mt, 3),
                          igb::fixed(speedup, 3), igb::fixed(speedup / mac_ratio, 3)});
    lines.push_back({{"bench", "thinning_speed"},
                     {"model", name},
                     {"batch", batch},
                     {"threads", threads},
                     {"runtime", runtime},
                     {"round_to", round_to},
                     {"macs_dense", dense.macs},
                     {"macs_thinned", thin.macs},
                     {"params_dense", dense.params},
                     {"params_thinned", thin.params},
                     {"dense_ms", md},
                     {"thinned_ms", mt},
                     {"mac_ratio", mac_ratio},
                     {"speedup", speedup},
                     {"speedup_over_mac_ratio", speedup / mac_ratio}});
  }
  std::cout << "Inference latency (" << runtime << ", thinning --round-to " << round_to
            << "), batch " << batch << ", " << threads << " threads, median of " << blocks * runs
            << " forward passes per side (alternating blocks)\n\n"
            << table.to_text() << "\n";
  for (const auto& l : lines) std::cout << l.dump() << "\n";
  return 0;
}
