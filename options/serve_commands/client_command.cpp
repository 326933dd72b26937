// igb-serve client: sends a labelled set through an early-exit cascade and reports accuracy and
// each unit's share and latency (docs/serving.md).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <thread>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "data/classify_data.h"
#include "deploy/serve/serve_master.h"
#include "options/serve_commands/serve_command.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

/// igb-serve client: a labelled set through an early-exit cascade.
class ClientCommand : public ToolCommand {
 public:
  ClientCommand() { options_.max_in_flight = 1; }

  void add_options(CLI::App& sub) override {
    sub.add_option("--address", options_.workers, "The first unit's address")
        ->required()
        ->expected(1);
    sub.add_option("--data", data_,
                   "Labelled data (its test split): digits, synthetic, a CIFAR-10 or MNIST "
                   "folder, or a folder of class folders")
        ->capture_default_str();
    sub.add_option("--dataset", dataset_, "Force the dataset format")->capture_default_str();
    sub.add_option("--max-samples", max_samples_,
                   "Send a fixed random subset of this many samples (0: all)")
        ->capture_default_str();
    sub.add_option("--in-flight", options_.max_in_flight,
                   "Samples sent and not yet answered at most (1: one at a time, so each "
                   "latency is the cascade's alone)")
        ->capture_default_str();
    sub.add_option("--timeout", timeout_s_, "Seconds a sample's answer may take")
        ->capture_default_str();
    sub.add_option("--clients", clients_,
                   "Clients at once, each sending the whole set on its own connection and "
                   "listening port (a load generator)")
        ->capture_default_str()
        ->check(CLI::Range(1, 256));
    sub.add_option("--rate", options_.rate_fps,
                   "Samples per second each client sends (0: as fast as --in-flight allows)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--listen", options_.listen, "HOST:PORT where answers come back")
        ->capture_default_str();
    sub.add_option("--advertise", options_.advertise,
                   "The address units send answers to (default: --listen's)");
    add_link_options(sub, options_.link, "the first unit");
    add_security_options(sub, security_);
    sub.add_option("--out", out_, "Folder for client.json and client_samples.csv");
  }

  void check_outputs() const override {
    if (!out_.empty()) check_output_folder("--out", out_);
  }

  int run() override {
    apply_security_options(security_);
    if (!(timeout_s_ > 0)) throw InputError("--timeout must be positive");
    if (options_.max_in_flight < 1) throw InputError("--in-flight must be at least 1");
    options_.timeout_ms = timeout_s_ * 1000.0;
    const auto unit = deploy::worker_report(options_.workers.at(0), options_.timeout_ms);
    if (!unit.cascade)
      throw InputError("--address " + options_.workers[0] +
                       " is not a cascade unit (igb-serve master runs pipeline stages)");
    data::ClassifyDataOptions o;
    o.dataset = dataset_;
    o.input_shape = unit.input_shape;
    o.seed = 0;
    o.synthetic_train = 1;
    o.test_split = true;
    const auto set = data::load_classify_data(data_, o);
    std::vector<int64_t> indices(static_cast<size_t>(set.val->size()));
    std::iota(indices.begin(), indices.end(), 0);
    if (max_samples_ > 0 && static_cast<int64_t>(indices.size()) > max_samples_) {
      std::shuffle(indices.begin(), indices.end(), std::mt19937(7));
      indices.resize(static_cast<size_t>(max_samples_));
      std::sort(indices.begin(), indices.end());
    }
    std::vector<at::Tensor> inputs;
    std::vector<int64_t> labels;
    for (int64_t i : indices) {
      const auto ex = set.val->get(i, 0);
      inputs.push_back(ex.input.unsqueeze(0).contiguous());
      labels.push_back(ex.target.item<int64_t>());
    }
    Logger logger;
    logger.info("sending " + std::to_string(inputs.size()) + " samples of " + set.description +
                " to " + unit.model + " at " + options_.workers[0] +
                (clients_ > 1 ? " from each of " + std::to_string(clients_) + " clients" : ""));
    const auto start = std::chrono::steady_clock::now();
    const auto runs = serve_all(inputs, unit.input_name, logger);
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report(runs, labels, set.description, wall_s);
    return kExitOk;
  }

 private:
  /// One client's run: its results, or why it ended.
  struct ClientRun {
    deploy::ServeResult result;
    std::string error;
  };

  /// Runs clients_ clients at once, each serving every input on its own master (its own
  /// listening port when there are several).
  std::vector<ClientRun> serve_all(const std::vector<at::Tensor>& inputs,
                                   const std::string& input_name, Logger& logger) {
    std::vector<ClientRun> runs(static_cast<size_t>(clients_));
    std::vector<std::unique_ptr<deploy::ServeMaster>> masters;
    for (int c = 0; c < clients_; ++c) {
      auto o = options_;
      if (clients_ > 1) o.listen = o.listen.substr(0, o.listen.rfind(':')) + ":0";
      masters.push_back(std::make_unique<deploy::ServeMaster>(o));
      masters.back()->attach(input_name);
    }
    std::atomic<int> answered{0};
    const int total = clients_ * static_cast<int>(inputs.size());
    std::vector<std::thread> threads;
    for (int c = 0; c < clients_; ++c)
      threads.emplace_back([&, c] {
        try {
          runs[static_cast<size_t>(c)].result =
              masters[static_cast<size_t>(c)]->serve(inputs, [&](int, int) {
                const int done = ++answered;
                if (done % 200 == 0 || done == total)
                  logger.info(std::to_string(done) + "/" + std::to_string(total) + " answered");
              });
        } catch (const std::exception& e) {
          runs[static_cast<size_t>(c)].error = e.what();
        }
      });
    for (auto& t : threads) t.join();
    return runs;
  }

  /// The value at `q` (0 to 1) of `v` sorted, by the nearest rank.
  static double percentile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, rank > 0 ? rank - 1 : 0)];
  }

  void report(const std::vector<ClientRun>& runs, const std::vector<int64_t>& labels,
              const std::string& description, double wall_s) {
    deploy::ServeResult all;
    std::vector<int64_t> all_labels;
    int lost = 0;
    for (const auto& run : runs) {
      if (!run.error.empty()) {
        lost += static_cast<int>(labels.size());
        std::cout << "a client ended: " << run.error << "\n";
        continue;
      }
      const auto& r = run.result;
      for (size_t i = 0; i < r.outputs.size(); ++i) {
        all.outputs.push_back(r.outputs[i]);
        all.answered_by.push_back(r.answered_by[i]);
        all.score.push_back(r.score[i]);
        all.fallback.push_back(r.fallback[i]);
        all.latency_ms.push_back(r.latency_ms[i]);
        all_labels.push_back(labels[i]);
      }
    }
    if (all_labels.empty()) throw std::runtime_error("no client was answered");
    double sum = 0;
    for (double l : all.latency_ms) sum += l;
    all.mean_latency_ms = sum / static_cast<double>(all.latency_ms.size());
    const int answered = static_cast<int>(all_labels.size());
    json load = {{"clients", clients_},
                 {"rate_per_client", options_.rate_fps},
                 {"answered", answered},
                 {"lost", lost},
                 {"throughput_per_s", answered / wall_s},
                 {"latency_ms",
                  {{"mean", all.mean_latency_ms},
                   {"p50", percentile(all.latency_ms, 0.50)},
                   {"p95", percentile(all.latency_ms, 0.95)},
                   {"p99", percentile(all.latency_ms, 0.99)}}}};
    std::cout << clients_ << (clients_ == 1 ? " client: " : " clients: ") << answered
              << " answered, " << lost << " lost, " << fixed(answered / wall_s, 1)
              << " samples/s; latency p50 " << fixed(load["latency_ms"]["p50"], 3) << " ms, p95 "
              << fixed(load["latency_ms"]["p95"], 3) << " ms, p99 "
              << fixed(load["latency_ms"]["p99"], 3) << " ms\n";
    report_units(all, all_labels, description, load);
  }

  void report_units(const deploy::ServeResult& r, const std::vector<int64_t>& labels,
                    const std::string& description, json load) {
    const int n = static_cast<int>(labels.size());
    struct Unit {
      int answered = 0, correct = 0, fallback = 0;
      double latency_ms = 0;
    };
    std::map<int, Unit> units;
    int correct = 0;
    std::string csv = "sample,label,unit,score,prediction,correct,latency_ms\n";
    for (int i = 0; i < n; ++i) {
      const int64_t prediction = r.outputs[i].at(0).argmax(1).item<int64_t>();
      const bool ok = prediction == labels[i];
      auto& u = units[r.answered_by[i]];
      ++u.answered;
      u.fallback += r.fallback[i].empty() ? 0 : 1;
      u.correct += ok ? 1 : 0;
      u.latency_ms += r.latency_ms[i];
      correct += ok ? 1 : 0;
      csv += std::to_string(i) + "," + std::to_string(labels[i]) + "," +
             std::to_string(r.answered_by[i]) + "," + fixed(r.score[i], 6) + "," +
             std::to_string(prediction) + "," + (ok ? "1" : "0") + "," + fixed(r.latency_ms[i], 3) +
             "\n";
    }
    Table t;
    t.columns = {"Unit", "Answered", "Share (%)", "Top-1 (%)", "Latency (ms)", "Next unit lost"};
    json j = {{"samples", n},
              {"load", std::move(load)},
              {"data", description},
              {"top1", 100.0 * correct / n},
              {"mean_latency_ms", r.mean_latency_ms},
              {"units", json::array()}};
    for (const auto& [index, u] : units) {
      t.rows.push_back({std::to_string(index), std::to_string(u.answered),
                        fixed(100.0 * u.answered / n, 2), fixed(100.0 * u.correct / u.answered, 2),
                        fixed(u.latency_ms / u.answered, 3), std::to_string(u.fallback)});
      j["units"].push_back({{"unit", index},
                            {"answered", u.answered},
                            {"share_pct", 100.0 * u.answered / n},
                            {"top1", 100.0 * u.correct / u.answered},
                            {"mean_latency_ms", u.latency_ms / u.answered},
                            {"fallback", u.fallback}});
    }
    std::cout << n << " samples of " << description << ": top-1 " << fixed(100.0 * correct / n, 2)
              << " %, mean latency " << fixed(r.mean_latency_ms, 3) << " ms\n"
              << t.to_text() << "\n";
    for (int i = 0; i < n; ++i)
      if (!r.fallback[i].empty()) {
        std::cout << "from sample " << i
                  << " on, a unit answered from its own exit: " << r.fallback[i] << "\n";
        break;
      }
    if (out_.empty()) return;
    write_text_atomically(fs::path(out_) / "client.json", j.dump(1) + "\n");
    write_text_atomically(fs::path(out_) / "client_samples.csv", csv);
    std::cout << "wrote client.json and client_samples.csv to " << out_ << "\n";
  }

  deploy::MasterOptions options_;
  SecurityOptions security_;
  std::string data_ = "digits", dataset_ = "auto", out_;
  int64_t max_samples_ = 0;
  int clients_ = 1;
  double timeout_s_ = 10;
};

}  // namespace

void add_client_command(Registry<ToolCommandSpec>& r) {
  r.add("client", {[] { return std::make_unique<ClientCommand>(); }},
        "Send a labelled set through an early-exit cascade: accuracy, and the share and latency "
        "of each unit");
}

}  // namespace igb::options
