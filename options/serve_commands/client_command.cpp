// igb-serve client: sends a labelled set through an early-exit cascade and reports accuracy and
// each unit's share and latency (docs/serving.md).
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <numeric>
#include <random>

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
                " to " + unit.model + " at " + options_.workers[0]);
    deploy::ServeMaster client(options_);
    client.attach(unit.input_name);
    const auto r = client.serve(inputs, [&](int done, int total) {
      if (done % 200 == 0 || done == total)
        logger.info(std::to_string(done) + "/" + std::to_string(total) + " answered");
    });
    report(r, labels, set.description);
    return kExitOk;
  }

 private:
  void report(const deploy::ServeResult& r, const std::vector<int64_t>& labels,
              const std::string& description) {
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
  double timeout_s_ = 10;
};

}  // namespace

void add_client_command(Registry<ToolCommandSpec>& r) {
  r.add("client", {[] { return std::make_unique<ClientCommand>(); }},
        "Send a labelled set through an early-exit cascade: accuracy, and the share and latency "
        "of each unit");
}

}  // namespace igb::options
