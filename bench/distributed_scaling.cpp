// Data-parallel scaling on this machine, in one run:
//  1. Training throughput: the same igb-train command (same model, data, steps and global batch)
//     as one process with --threads T and as --nproc N processes with batch/N each and T/N
//     threads each. Throughput is examples a second of the last epoch's training, from
//     train.log's progress lines (rank 0's examples times N for the job); the job's line
//     "gradient all-reduce over N processes: X ms a step" is the time rank 0 spent in the
//     reduction, which includes waiting for the slower rank.
//  2. The reduction alone: N ranks as threads of this process on loopback average the model's
//     gradient tensors (the same buckets as training) R times; the median time of one call.
// Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <future>
#include <iostream>
#include <regex>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/distributed.h"
#include "core/fs.h"
#include "core/subprocess.h"
#include "core/table.h"
#include "models/model.h"

namespace fs = std::filesystem;

namespace {

/// The last "N samples/s" of a train.log's progress lines for the final epoch, and the
/// all-reduce figure when the job printed one.
struct TrainMeasure {
  double samples_per_s = 0;
  double allreduce_ms = -1;
};

TrainMeasure measure_run(const std::vector<std::string>& argv, const fs::path& out) {
  std::error_code ec;
  fs::remove_all(out, ec);
  const int code = igb::wait_process(igb::start_process(argv, out.string() + ".log"));
  if (code != 0)
    throw std::runtime_error("igb-train failed (exit " + std::to_string(code) + "), see " +
                             out.string() + ".log");
  const std::string log = igb::read_text_file(out / "train.log");
  TrainMeasure m;
  const std::regex rate(R"(([0-9.]+) samples/s)");
  const std::regex reduce(R"(all-reduce over \d+ processes: ([0-9.]+) ms a step)");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), rate); it != std::sregex_iterator();
       ++it)
    m.samples_per_s = std::stod((*it)[1]);
  std::smatch s;
  if (std::regex_search(log, s, reduce)) m.allreduce_ms = std::stod(s[1]);
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median milliseconds of one average() of `grads` over `nproc` thread ranks.
double reduction_ms(const std::vector<at::Tensor>& grads, int64_t nproc, int repeats) {
  const int64_t port = igb::free_local_port();
  std::vector<std::future<std::vector<double>>> ranks;
  for (int64_t r = 0; r < nproc; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      igb::DistEnv env;
      env.rank = r;
      env.world_size = env.local_world_size = nproc;
      env.local_rank = r;
      env.master_port = port;
      igb::Distributed group(env, std::chrono::seconds(60));
      std::vector<at::Tensor> mine;
      for (const auto& g : grads) mine.push_back(g.clone());
      std::vector<double> ms;
      for (int i = 0; i < repeats; ++i) {
        group.barrier();
        const auto t0 = std::chrono::steady_clock::now();
        group.average(mine);
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      return ms;
    }));
  std::vector<double> all;
  for (auto& f : ranks)
    for (double v : f.get()) all.push_back(v);
  return median(all);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Training throughput of 1 against N data-parallel processes, and the gradient "
      "all-reduce time");
  std::string optform = "classify", model = "resnet20_cifar";
  int64_t nproc = 2, batch = 64, threads = 2, batches = 40, repeats = 50;
  app.add_option("--optform", optform)->capture_default_str();
  app.add_option("--model", model)->capture_default_str();
  app.add_option("--nproc", nproc, "Processes of the data-parallel job")->capture_default_str();
  app.add_option("--batch-size", batch, "Global batch (each of N processes takes batch/N)")
      ->capture_default_str();
  app.add_option("--threads", threads, "Threads of the single process (each rank: threads/N)")
      ->capture_default_str();
  app.add_option("--batches", batches, "Steps of the measured epoch")->capture_default_str();
  app.add_option("--repeats", repeats, "All-reduce calls timed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (nproc < 2 || batch % nproc != 0) {
    std::cerr << "distributed_scaling: --nproc must be at least 2 and divide --batch-size\n";
    return 2;
  }

  igb::TempDir tmp("igb-bench-dist");
  const std::string train = (igb::executable_dir().parent_path() / "apps" / "igb-train").string();
  const auto command = [&](int64_t n) {
    std::vector<std::string> a{
        train,           "--optform=" + optform,
        "--model",       model,
        "--epochs",      "2",
        "--max-batches", std::to_string(batches),
        "--batch-size",  std::to_string(batch / n),
        "--threads",     std::to_string(std::max<int64_t>(1, threads / n)),
        "--log-every",   std::to_string(batches),
        "--out",         (tmp.path() / ("run" + std::to_string(n))).string()};
    if (n > 1) a.insert(a.end(), {"--nproc", std::to_string(n)});
    return a;
  };
  const auto one = measure_run(command(1), tmp.path() / "run1");
  const auto many = measure_run(command(nproc), tmp.path() / ("run" + std::to_string(nproc)));
  const double many_rate = many.samples_per_s * static_cast<double>(nproc);

  igb::models::register_builtin_models();
  auto net = igb::models::create_model(model, nlohmann::json::object());
  std::vector<at::Tensor> grads;
  int64_t grad_values = 0;
  for (const auto& p : net->parameters()) {
    grads.push_back(torch::randn_like(p));
    grad_values += p.numel();
  }
  const double reduce_ms = reduction_ms(grads, nproc, static_cast<int>(repeats));

  igb::Table table;
  table.columns = {"run", "examples/s", "ratio", "all-reduce ms/step"};
  table.rows.push_back(
      {"1 process, " + std::to_string(threads) + " threads, batch " + std::to_string(batch),
       igb::fixed(one.samples_per_s, 1), "1.00", "-"});
  table.rows.push_back({std::to_string(nproc) + " processes, " +
                            std::to_string(std::max<int64_t>(1, threads / nproc)) +
                            " thread(s), batch " + std::to_string(batch / nproc) + " each",
                        igb::fixed(many_rate, 1), igb::fixed(many_rate / one.samples_per_s, 2),
                        igb::fixed(many.allreduce_ms, 2) + " (in training)"});
  table.rows.push_back({"all-reduce alone, " + std::to_string(grad_values) + " gradient values",
                        "-", "-", igb::fixed(reduce_ms, 2)});
  std::cout << model << ", " << batches << " steps of a global batch of " << batch << "\n"
            << table.to_text() << std::flush;
  nlohmann::json j = {{"model", model},
                      {"nproc", nproc},
                      {"global_batch", batch},
                      {"single_examples_per_s", one.samples_per_s},
                      {"parallel_examples_per_s", many_rate},
                      {"ratio", many_rate / one.samples_per_s},
                      {"allreduce_ms_in_training", many.allreduce_ms},
                      {"allreduce_ms_alone", reduce_ms},
                      {"gradient_values", grad_values}};
  std::cout << j.dump() << std::endl;
  return 0;
}
