// Forward latency of an imported TorchScript model (--model torchscript:PATH, rebuilt as native
// modules and interpreted blocks) against the same file run by LibTorch's own TorchScript executor
// (torch::jit::Module::forward, the peer) and against the zoo twin igb builds natively, in one run:
// alternating blocks of forwards on the same input, evaluation mode, no gradients; medians per
// batch size, and the ratios. Prints a table and one JSON line.
//
//   igb_bench_torchscript_forward --file resnet20.pt --zoo resnet20_cifar --zoo-arg shortcut=conv
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/host.h"
#include "models/model.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double seconds_of(const std::function<void()>& f, int64_t repeats) {
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < repeats; ++i) f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         static_cast<double>(repeats);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Forward latency of an imported TorchScript model, its file in LibTorch's executor "
      "and its zoo twin");
  std::string file, zoo;
  std::vector<std::string> zoo_args;
  std::vector<int64_t> batches{1, 32};
  int64_t repeats = 20, blocks = 7, threads = 2;
  app.add_option("--file", file, "TorchScript file")->required();
  app.add_option("--zoo", zoo, "The zoo twin (optional)");
  app.add_option("--zoo-arg", zoo_args, "Model option KEY=VALUE of the twin");
  app.add_option("--batches", batches, "Batch sizes")->delimiter(',')->capture_default_str();
  app.add_option("--repeats", repeats, "Forwards per block")->capture_default_str();
  app.add_option("--blocks", blocks, "Alternating blocks per side")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();

  auto imported = igb::models::create_model("torchscript:" + file, {});
  imported->eval();
  auto script = torch::jit::load(file);
  script.eval();
  igb::models::Model twin;
  if (!zoo.empty()) {
    nlohmann::json opts = nlohmann::json::object();
    for (const auto& kv : zoo_args) {
      const auto eq = kv.find('=');
      opts[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    twin = igb::models::create_model(zoo, opts);
    twin->eval();
  }
  torch::NoGradGuard no_grad;
  nlohmann::json rows = nlohmann::json::array();
  std::cout << " Batch | imported (ms) | TorchScript executor (ms) | zoo twin (ms) | imported / "
               "executor | imported / twin\n";
  for (int64_t b : batches) {
    auto shape = imported->input_shape();
    shape[0] = b;
    torch::manual_seed(0);
    const auto x = torch::randn(shape);
    std::vector<double> t_imported, t_script, t_twin;
    for (int64_t k = 0; k < blocks; ++k) {
      t_imported.push_back(seconds_of([&] { imported->forward(x); }, repeats));
      t_script.push_back(seconds_of([&] { script.forward({x}); }, repeats));
      if (twin) t_twin.push_back(seconds_of([&] { twin->forward(x); }, repeats));
    }
    // The first block warms caches and the executor's profiling runs up.
    t_imported.erase(t_imported.begin());
    t_script.erase(t_script.begin());
    if (twin) t_twin.erase(t_twin.begin());
    const double mi = median(t_imported) * 1e3, ms = median(t_script) * 1e3;
    const double mt = twin ? median(t_twin) * 1e3 : 0;
    auto fixed3 = [](double v) {
      std::ostringstream s;
      s << std::fixed << std::setprecision(3) << v;
      return s.str();
    };
    std::cout << " " << std::setw(5) << b << " | " << std::setw(13) << fixed3(mi) << " | "
              << std::setw(25) << fixed3(ms) << " | " << std::setw(13) << (twin ? fixed3(mt) : "-")
              << " | " << std::setw(19) << fixed3(mi / ms) << " | "
              << (twin ? fixed3(mi / mt) : "-") << "\n";
    rows.push_back(
        {{"batch", b},
         {"imported_ms", mi},
         {"executor_ms", ms},
         {"twin_ms", twin ? nlohmann::json(mt) : nlohmann::json(nullptr)},
         {"imported_over_executor", mi / ms},
         {"imported_over_twin", twin ? nlohmann::json(mi / mt) : nlohmann::json(nullptr)}});
  }
  std::cout
      << nlohmann::json{{"file", file}, {"zoo", zoo}, {"threads", threads}, {"rows", rows}}.dump()
      << "\n";
  return 0;
}
