// What a sensitivity sweep costs beyond its evaluations, in one run: the optform's evaluation of a
// model (the classifier's validation batches, or the SR model's images, loaded once) is timed
// alone `repeat` times; then igb-tools sensitivity's sweep runs over every conv and linear weight
// at each level, in each mode asked for. The ratio is the sweep's wall time over (its number of
// evaluations × the median single evaluation): 1 means the pruning, the restoring and the
// bookkeeping cost nothing. Weights are drawn after a fixed seed. Prints a table and one JSON
// line.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/host.h"
#include "core/table.h"
#include "graph/summary_graph.h"
#include "models/family.h"
#include "models/model.h"
#include "tools/sensitivity.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Sensitivity sweep time against its evaluations alone");
  std::string model_name = "resnet20_cifar", modes = "element,filter-deps", levels = "0:0.9:0.1";
  int64_t threads = 2, batches = 1, repeat = 5;
  app.add_option("--model", model_name, "A zoo model (classify or sr)")->capture_default_str();
  app.add_option("--modes", modes, "Comma-separated: element, filter, filter-deps, channel")
      ->capture_default_str();
  app.add_option("--levels", levels, "Levels of the sweep")->capture_default_str();
  app.add_option("--eval-batches", batches, "Evaluation batches (classify: 128 images; sr: images)")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "Single evaluations timed")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (threads < 1 || batches < 1 || repeat < 1) {
    std::cerr << "--threads, --eval-batches and --repeat must be at least 1\n";
    return 2;
  }
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();
  try {
    torch::manual_seed(0);
    auto model = igb::models::create_model(model_name, {});
    model->eval();
    igb::models::EvalData data;
    data.batches = batches;
    const auto evaluator = igb::models::family_of_model(model_name)
                               .make_evaluator(*model, data, c10::Device(c10::kCPU));
    const std::string loaded = evaluator->description();
    auto evaluate = [&] { return igb::models::evaluate_model(*evaluator, *model).metrics; };
    const auto graph = igb::graph::SummaryGraph::build(
        *model, model->input_shape(), [&](const torch::Tensor& x) { return model->forward(x); },
        model_name);
    std::vector<double> single;
    evaluate();  // warm-up
    for (int64_t i = 0; i < repeat; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      evaluate();
      single.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double one = median(single);
    igb::Table table{{"mode", "evaluations", "sweep s", "evaluations × one s", "ratio"}, {}};
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& mode : split(modes)) {
      const bool deps = mode == "filter-deps";
      auto options = igb::tools::SensitivityOptions()
                         .mode(igb::tools::parse_sensitivity_mode(deps ? "filter" : mode))
                         .levels(igb::tools::parse_sensitivity_levels(levels))
                         .with_dependencies(deps);
      const auto r = igb::tools::sensitivity_sweep(*model, graph, options, evaluate);
      const double ideal = static_cast<double>(r.evaluations) * one;
      table.rows.push_back({mode, std::to_string(r.evaluations), igb::fixed(r.seconds, 2),
                            igb::fixed(ideal, 2), igb::fixed(r.seconds / ideal, 3)});
      rows.push_back({{"mode", mode},
                      {"evaluations", r.evaluations},
                      {"sweep_seconds", r.seconds},
                      {"evaluation_seconds", r.evaluation_seconds},
                      {"ideal_seconds", ideal},
                      {"ratio", r.seconds / ideal}});
    }
    std::cout << model_name << ", " << loaded << ", one evaluation " << igb::fixed(one * 1000, 1)
              << " ms (median of " << repeat << "), " << threads << " threads\n"
              << table.to_text()
              << nlohmann::json{{"bench", "sensitivity_cost"},
                                {"model", model_name},
                                {"one_evaluation_seconds", one},
                                {"rows", rows}}
                     .dump()
              << "\n";
  } catch (const std::exception& e) {
    std::cerr << "sensitivity_cost: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
