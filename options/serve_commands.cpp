// igb-serve: the worker and master programs of a serving chain (docs/serving.md).
#include "options/serve_commands.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <numeric>
#include <random>

#include "compress/scheduler.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "data/classify_data.h"
#include "deploy/early_exit/exit_network.h"
#include "deploy/partition/devices_file.h"
#include "deploy/partition/model_partition.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "deploy/serve/serve_master.h"
#include "deploy/serve/serve_worker.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/tool_commands/partition_support.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

void add_link_options(CLI::App& sub, deploy::LinkEmulation& link, const std::string& to) {
  sub.add_option("--link-bandwidth", link.bandwidth_mb_s,
                 "Emulate a link of this many MB/s (10^6 bytes) to " + to +
                     " (0: as fast as the "
                     "network)")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--link-latency", link.latency_ms,
                 "Emulate this many ms of latency per message to " + to)
      ->check(CLI::NonNegativeNumber);
}

json read_json_file(const std::string& path, const std::string& option) {
  std::ifstream in(path);
  if (!in) throw InputError(option + " " + path + ": cannot be read");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw InputError(option + " " + path + ": not JSON (" + std::string(e.what()) + ")");
  }
}

class WorkerCommand {
 public:
  void add_options(CLI::App& sub) {
    sub.add_option("--listen", options_.listen, "HOST:PORT to serve on (port 0 picks one)")
        ->capture_default_str();
    add_target_options(sub, target_, true);
    sub.add_option("--compute-threads", options_.compute_threads,
                   "Threads running stages (1: one frame at a time, in arrival order)")
        ->capture_default_str();
    add_link_options(sub, options_.link, "the next worker");
    sub.add_option("--compute-speed", options_.compute_speed,
                   "Emulate a machine this many times as fast as this one (in (0, 1]; a devices "
                   "file's speed relative to this machine)")
        ->capture_default_str();
    sub.add_option("--cascade", cascade_,
                   "Be a unit of an early-exit cascade: the segments' manifest.json "
                   "(igb-tools early-exit --export)");
    sub.add_option("--unit", unit_.unit, "With --cascade: the segment this unit runs (0-based)");
    sub.add_option("--next", unit_.next, "With --cascade: the next unit's address");
    sub.add_option("--timeout", timeout_s_,
                   "With --cascade: seconds a message to the next unit "
                   "may take")
        ->capture_default_str();
  }

  int run() {
    configure_runtime(target_.threads, "cpu");
    // A zoo model without a checkpoint has the same initial weights in every process.
    torch::manual_seed(0);
    const auto m = target_.load();
    auto model = m.model;
    model->eval();
    const auto graph = tool_graph(m, m.input);
    deploy::StageWorker worker(
        *model, graph, [model](const torch::Tensor& x) { return model->forward(x); }, options_);
    std::unique_ptr<deploy::ExitNetwork> net;
    if (!cascade_.empty()) {
      const json manifest = read_json_file(cascade_, "--cascade");
      if (manifest.value("format", "") != "igb early-exit segments")
        throw InputError("--cascade " + cascade_ +
                         ": not an early-exit manifest (igb-tools early-exit --export writes one)");
      net = std::make_unique<deploy::ExitNetwork>(*model, graph);
      const auto& segments = manifest.at("segments");
      if (segments.size() != net->exits())
        throw InputError("--cascade " + cascade_ + " has " + std::to_string(segments.size()) +
                         " segments; " + m.name + " has " + std::to_string(net->exits()));
      unit_.criterion = deploy::parse_exit_criterion(manifest.at("criterion").get<std::string>());
      if (unit_.unit >= 0 && unit_.unit < static_cast<int>(segments.size())) {
        const auto& t = segments.at(unit_.unit).at("threshold");
        unit_.score_threshold = t.is_null()
                                    ? std::numeric_limits<double>::infinity()
                                    : deploy::score_threshold(unit_.criterion, t.get<double>());
      }
      unit_.timeout_ms = timeout_s_ * 1000.0;
      worker.set_cascade(*net, unit_);
    } else if (!unit_.next.empty()) {
      throw InputError(
          "--next is for cascade units (--cascade); a master gives pipeline stages "
          "their next worker");
    }
    const std::string address = worker.start();
    std::cout << "igb-serve worker: " << m.name << " " << tools::shape_to_string(m.input)
              << (net ? ", cascade unit " + std::to_string(unit_.unit) : std::string())
              << ", listening on " << address << std::endl;
    worker.wait();
    return kExitOk;
  }

 private:
  ToolTarget target_;
  deploy::WorkerOptions options_;
  std::string cascade_;
  deploy::CascadeUnit unit_;
  double timeout_s_ = 10;
};

class MasterCommand {
 public:
  void add_options(CLI::App& sub) {
    sub.add_option("--plan", plan_, "plan.json of igb-tools partition --out")->required();
    sub.add_option("--workers", workers_, "The workers' addresses, one per stage in chain order")
        ->delimiter(',')
        ->required();
    // The input shape is the plan's.
    sub.add_option("--model", target_.model, "The plan's model: a zoo model or torchscript:PATH");
    sub.add_option("--model-arg", target_.options, "Model option KEY=VALUE (repeatable)");
    sub.add_option("--checkpoint", target_.checkpoint, "The plan's model, from a checkpoint");
    add_threads_option(sub, target_.threads);
    sub.add_option("--input", input_, "A video file or a folder of images (the frames)")
        ->required();
    sub.add_option("--frames", frames_, "Frames to send")->capture_default_str();
    sub.add_option("--rate", options_.rate_fps, "Frames per second (0: back to back)")
        ->capture_default_str();
    sub.add_option("--mode", mode_, "full: whole tensors; diff: later frames as differences")
        ->capture_default_str();
    sub.add_option("--transfer", transfer_, "Precision on the links: fp32, fp16 or int8")
        ->capture_default_str();
    sub.add_option("--timeout", timeout_s_, "Seconds a frame's result may take")
        ->capture_default_str();
    sub.add_option("--listen", options_.listen, "HOST:PORT where results come back")
        ->capture_default_str();
    sub.add_option("--advertise", options_.advertise,
                   "The address the last worker sends results to (default: --listen's)");
    add_link_options(sub, options_.link, "the first worker");
    sub.add_flag("--replan", replan_,
                 "After --replan-after frames, re-plan from the workers' measured op costs and "
                 "link throughput, and serve the rest on the new plan");
    sub.add_option("--replan-after", replan_after_, "Frames served on the first plan")
        ->capture_default_str();
    sub.add_flag("--verify", verify_,
                 "Compare every result with the model's own forward pass on the frame");
    sub.add_option("--out", out_, "Folder for serve.json and serve_frames.csv");
    sub.add_option("--cache-dir", cache_dir_, "Where measured per-op costs are cached");
  }

  int run() {
    if (!out_.empty()) check_output_folder("--out", out_);
    configure_runtime(target_.threads, "cpu");
    check_options();
    const json plan = read_json_file(plan_, "--plan");
    if (!plan.contains("plans") || !plan["plans"].is_array() || plan["plans"].empty())
      throw InputError("--plan " + plan_ + ": not a plan.json of igb-tools partition --out");
    if (plan.contains("input") && plan["input"].is_array()) {
      tools::Shape shape;
      for (const auto& d : plan["input"])
        if (d.is_number_integer()) shape.push_back(d.get<int64_t>());
      target_.input = tools::shape_to_string(shape);
    }
    // A zoo model without a checkpoint has the same initial weights in every process.
    torch::manual_seed(0);
    const auto m = target_.load();
    auto model = m.model;
    model->eval();
    const auto graph = tool_graph(m, m.input);
    const tools::SummaryGraph::Forward forward = [model](const torch::Tensor& x) {
      return model->forward(x);
    };
    if (plan.value("model", "") != m.name || plan.value("input", json::array()) != json(m.input))
      throw InputError("--plan " + plan_ + " is for " + plan.value("model", std::string("?")) +
                       " at " + plan.value("input", json::array()).dump() + ", not " + m.name +
                       " at " + tools::shape_to_string(m.input));
    // The optimal plan (the first of the file): its ops per device.
    deploy::Assignment assignment(graph.ops().size(), -1);
    std::vector<std::string> device_names;
    for (const auto& d : plan["plans"][0].at("devices")) {
      const int index = static_cast<int>(device_names.size());
      device_names.push_back(d.at("device").get<std::string>());
      for (const auto& op : d.at("ops")) assignment.at(graph.index(op.get<std::string>())) = index;
    }
    auto stages = deploy::split_stages(graph, assignment, device_names);
    auto frames = read_model_frames(input_, m.input, frames_, "--input");
    Logger logger;
    Chain chain{plan_devices(plan), {}, {}};
    chain.costs = device_layer_costs(chain.devices, *model, graph, forward, cache_dir_, logger);
    measure_traffic(graph, frames, chain);
    options_.weights = deploy::weights_digest(*model);
    deploy::ServeMaster master(graph, options_);
    master.configure(stages, 1);
    logger.info("configured " + std::to_string(stages.size()) + " workers; sending " +
                std::to_string(frames.size()) + " frames");
    if (replan_) {
      // The Python system plans the first frame and the second apart, then keeps the second's
      // plan: every change of plan empties the workers' difference caches.
      const size_t k = std::min<size_t>(static_cast<size_t>(replan_after_), frames.size() - 1);
      master.serve({frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(k)});
      if (replan(plan, graph, device_names, chain, assignment, logger))
        stages = deploy::split_stages(graph, assignment, device_names);
      master.configure(stages, 2);
      frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(k));
    }
    const auto result = master.serve(frames, [&](int done, int total) {
      if (done % 50 == 0 || done == total)
        logger.info(std::to_string(done) + "/" + std::to_string(total) + " frames served");
    });
    const double max_diff = verify_ ? verify(model, frames, result) : -1;
    report(stages, result, simulate(graph, chain, assignment, frames.size()), max_diff);
    return kExitOk;
  }

 private:
  /// The chain as the simulator sees it: devices and links, each device's op costs, and the
  /// tensors' measured zeros.
  struct Chain {
    deploy::DevicesFile devices;
    std::vector<deploy::LayerCosts> costs;
    std::map<int, deploy::ValueTraffic> traffic;
  };

  void check_options() {
    if (mode_ != "full" && mode_ != "diff")
      throw InputError("--mode must be full or diff, not '" + mode_ + "'");
    if (frames_ < 1) throw InputError("--frames must be at least 1");
    if (!(timeout_s_ > 0)) throw InputError("--timeout must be positive");
    if (replan_ && frames_ < 2) throw InputError("--replan needs --frames of at least 2");
    if (replan_after_ < 1) throw InputError("--replan-after must be at least 1");
    options_.diff = mode_ == "diff";
    options_.precision = deploy::parse_transfer_precision(transfer_);
    options_.timeout_ms = timeout_s_ * 1000.0;
    options_.workers = workers_;
  }

  deploy::DevicesFile plan_devices(const json& plan) const {
    fs::path devices_file = plan.value("devices_file", "");
    if (devices_file.empty()) throw InputError("--plan " + plan_ + " names no devices_file");
    if (!fs::exists(devices_file) && devices_file.is_relative())
      devices_file = fs::path(plan_).parent_path() / devices_file;
    return deploy::load_devices_file(devices_file);
  }

  /// Zero ratios of every tensor on the first 8 frames (as igb-tools partition --frames-from).
  static void measure_traffic(const tools::SummaryGraph& graph,
                              const std::vector<at::Tensor>& frames, Chain& chain) {
    const std::vector<at::Tensor> sample(frames.begin(),
                                         frames.begin() + std::min<size_t>(frames.size(), 8));
    if (sample.size() >= 2) chain.traffic = deploy::measure_traffic(graph, sample);
  }

  /// Re-plans from what the workers measured: each device's op costs on its own machine (speed
  /// 1), each link's bandwidth from the bytes its sender moved and the time they took. Returns
  /// whether the plan changed (then `assignment` is the new one and `chain` the measured chain).
  bool replan(const json& plan, const tools::SummaryGraph& graph,
              const std::vector<std::string>& device_names, Chain& chain,
              deploy::Assignment& assignment, Logger& logger) {
    Chain measured = chain;
    const auto stages = deploy::split_stages(graph, assignment, device_names);
    for (size_t i = 0; i < stages.size(); ++i) {
      const auto info = deploy::worker_report(workers_[i], options_.timeout_ms, true);
      auto& c = measured.costs.at(static_cast<size_t>(stages[i].device));
      c.ms = info.costs;
      c.machine = info.machine;
      measured.devices.devices.at(static_cast<size_t>(stages[i].device)).speed = 1;
      const auto link = static_cast<size_t>(stages[i].device);
      if (i + 1 < stages.size() && info.send_ms > 0 && info.bytes_sent > 0 &&
          link < measured.devices.links.size())
        measured.devices.links[link].bandwidth =
            static_cast<double>(info.bytes_sent) / (info.send_ms / 1000.0);
    }
    const auto objective = deploy::parse_objective(plan.value("objective", "latency"));
    const auto problem = this->problem(graph, measured, true);
    const auto next = deploy::solve_partition(problem, objective).assignment;
    const bool changed = next != assignment;
    int moved = 0;
    for (size_t i = 0; i < next.size(); ++i) moved += next[i] != assignment[i] ? 1 : 0;
    logger.info(changed ? "re-planned from the workers' measurements: " + std::to_string(moved) +
                              " ops move"
                        : "re-planned from the workers' measurements: the plan stays");
    if (changed) {
      const auto next_stages = deploy::split_stages(graph, next, device_names);
      if (next_stages.size() != stages.size()) {
        logger.info("the new plan leaves a device without ops; keeping the first plan");
        return false;
      }
      assignment = next;
    }
    chain = std::move(measured);
    return changed;
  }

  deploy::PartitionProblem problem(const tools::SummaryGraph& graph, const Chain& chain,
                                   bool later) const {
    deploy::ModelPartitionInputs in;
    in.precision = options_.precision;
    in.costs = chain.costs;
    if (!chain.traffic.empty()) in.traffic = &chain.traffic;
    in.differences = later && options_.diff && in.traffic;
    return deploy::partition_problem(graph, chain.devices, in);
  }

  /// The simulator's figures for the plan, frame count and rate (docs/partition.md).
  deploy::SimulationResult simulate(const tools::SummaryGraph& graph, const Chain& chain,
                                    const deploy::Assignment& assignment, size_t frames) const {
    deploy::SimulationOptions so;
    so.frames = static_cast<int>(frames);
    so.rate_fps = options_.rate_fps;
    return deploy::simulate_pipeline(
        deploy::pipeline_servers(problem(graph, chain, false), problem(graph, chain, true),
                                 assignment),
        so);
  }

  static double verify(const models::Model& model, const std::vector<at::Tensor>& frames,
                       const deploy::ServeResult& result) {
    torch::NoGradGuard no_grad;
    double max_diff = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      const at::Tensor ref = model->forward(frames[i]);
      if (result.outputs[i].empty() || result.outputs[i][0].sizes() != ref.sizes())
        throw std::runtime_error("frame " + std::to_string(i) +
                                 ": the chain's output does not have the model's shape");
      max_diff = std::max(max_diff, (result.outputs[i][0] - ref).abs().max().item<double>());
    }
    return max_diff;
  }

  void report(const std::vector<deploy::Stage>& stages, const deploy::ServeResult& r,
              const deploy::SimulationResult& sim, double max_diff) {
    const int n = static_cast<int>(r.latency_ms.size());
    if (r.stages.size() < stages.size()) return;
    Table t;
    t.columns = {"Stage",
                 "Device",
                 "Worker",
                 "Ops",
                 "Compute (ms/frame)",
                 "Queue (ms/frame)",
                 "In first (B)",
                 "In later (B/frame)"};
    for (size_t s = 0; s < stages.size(); ++s) {
      const auto& st = r.stages[s];
      t.rows.push_back(
          {std::to_string(s), stages[s].device_name, st.worker,
           std::to_string(stages[s].ops.size()), fixed(st.compute_ms / n, 3),
           fixed(st.queue_ms / n, 3), std::to_string(r.link_bytes_first[s]),
           n > 1 ? fixed(static_cast<double>(r.link_bytes_later[s]) / (n - 1), 0) : "-"});
    }
    std::cout << "Stages\n" << t.to_text() << "\n";
    Table s;

    s.columns = {"", "Measured", "Simulated", "Measured / simulated"};
    auto row = [&](const std::string& what, double a, double b) {
      s.rows.push_back({what, fixed(a, 3), fixed(b, 3), b > 0 ? fixed(a / b, 3) : "-"});
    };
    row("Mean latency (ms)", r.mean_latency_ms, sim.mean_latency_ms);
    row("First frame (ms)", r.latency_ms.front(), sim.latency_ms.front());
    row("Throughput (fps)", r.steady_fps, sim.steady_fps);
    std::cout << "Measured against the simulator\n" << s.to_text() << "\n";
    if (max_diff >= 0)
      std::cout << "--verify: largest difference from the model's forward "
                << (max_diff == 0 ? std::string("0") : fixed(max_diff, 9)) << " over " << n
                << " frames\n";
    if (out_.empty()) return;
    json j = {{"frames", n},
              {"mode", mode_},
              {"transfer", transfer_},
              {"rate_fps", options_.rate_fps},
              {"mean_latency_ms", r.mean_latency_ms},
              {"max_latency_ms", r.max_latency_ms},
              {"throughput_fps", r.steady_fps},
              {"simulated",
               {{"mean_latency_ms", sim.mean_latency_ms},
                {"first_latency_ms", sim.latency_ms.front()},
                {"throughput_fps", sim.steady_fps}}},
              {"stages", json::array()}};
    if (max_diff >= 0) j["verify_max_abs_diff"] = max_diff;
    for (size_t i = 0; i < stages.size(); ++i)
      j["stages"].push_back({{"stage", i},
                             {"device", stages[i].device_name},
                             {"worker", r.stages[i].worker},
                             {"compute_ms", r.stages[i].compute_ms / n},
                             {"queue_ms", r.stages[i].queue_ms / n},
                             {"bytes_in_first", r.link_bytes_first[i]},
                             {"bytes_in_later", r.link_bytes_later[i]}});
    write_text_atomically(fs::path(out_) / "serve.json", j.dump(1) + "\n");
    std::string csv = "frame,sent_ms,done_ms,latency_ms\n";
    for (int i = 0; i < n; ++i)
      csv += std::to_string(i) + "," + fixed(r.sent_ms[i], 3) + "," + fixed(r.done_ms[i], 3) + "," +
             fixed(r.latency_ms[i], 3) + "\n";
    write_text_atomically(fs::path(out_) / "serve_frames.csv", csv);
    std::cout << "wrote serve.json and serve_frames.csv to " << out_ << "\n";
  }

  ToolTarget target_;
  deploy::MasterOptions options_;
  std::string plan_, input_, mode_ = "full", transfer_ = "fp32", out_, cache_dir_;
  std::vector<std::string> workers_;
  int frames_ = 30;
  double timeout_s_ = 10;
  bool verify_ = false, replan_ = false;
  int replan_after_ = 1;
};

/// igb-serve client: a labelled set through an early-exit cascade.
class ClientCommand {
 public:
  ClientCommand() { options_.max_in_flight = 1; }

  void add_options(CLI::App& sub) {
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
    sub.add_option("--out", out_, "Folder for client.json and client_samples.csv");
  }

  int run() {
    if (!out_.empty()) check_output_folder("--out", out_);
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
      int answered = 0, correct = 0;
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
      u.correct += ok ? 1 : 0;
      u.latency_ms += r.latency_ms[i];
      correct += ok ? 1 : 0;
      csv += std::to_string(i) + "," + std::to_string(labels[i]) + "," +
             std::to_string(r.answered_by[i]) + "," + fixed(r.score[i], 6) + "," +
             std::to_string(prediction) + "," + (ok ? "1" : "0") + "," + fixed(r.latency_ms[i], 3) +
             "\n";
    }
    Table t;
    t.columns = {"Unit", "Answered", "Share (%)", "Top-1 (%)", "Latency (ms)"};
    json j = {{"samples", n},
              {"data", description},
              {"top1", 100.0 * correct / n},
              {"mean_latency_ms", r.mean_latency_ms},
              {"units", json::array()}};
    for (const auto& [index, u] : units) {
      t.rows.push_back({std::to_string(index), std::to_string(u.answered),
                        fixed(100.0 * u.answered / n, 2), fixed(100.0 * u.correct / u.answered, 2),
                        fixed(u.latency_ms / u.answered, 3)});
      j["units"].push_back({{"unit", index},
                            {"answered", u.answered},
                            {"share_pct", 100.0 * u.answered / n},
                            {"top1", 100.0 * u.correct / u.answered},
                            {"mean_latency_ms", u.latency_ms / u.answered}});
    }
    std::cout << n << " samples of " << description << ": top-1 " << fixed(100.0 * correct / n, 2)
              << " %, mean latency " << fixed(r.mean_latency_ms, 3) << " ms\n"
              << t.to_text() << "\n";
    if (out_.empty()) return;
    write_text_atomically(fs::path(out_) / "client.json", j.dump(1) + "\n");
    write_text_atomically(fs::path(out_) / "client_samples.csv", csv);
    std::cout << "wrote client.json and client_samples.csv to " << out_ << "\n";
  }

  deploy::MasterOptions options_;
  std::string data_ = "digits", dataset_ = "auto", out_;
  int64_t max_samples_ = 0;
  double timeout_s_ = 10;
};

}  // namespace

int serve_main(int argc, char** argv) {
  models::register_builtin_models();
  compress::register_builtin_compression();
  CLI::App app("The serving chain: stage workers over gRPC and the master that feeds them.",
               "igb-serve");
  app.require_subcommand(1);
  WorkerCommand worker;
  MasterCommand master;
  ClientCommand client;
  auto* w = app.add_subcommand("worker",
                               "Hold a model and run the stage a master gives it, or "
                               "one unit of an early-exit cascade");
  worker.add_options(*w);
  auto* m = app.add_subcommand("master",
                               "Run a plan of igb-tools partition on workers: send "
                               "frames, collect results, measure against the simulator");
  master.add_options(*m);
  auto* c = app.add_subcommand("client",
                               "Send a labelled set through an early-exit cascade: "
                               "accuracy, and the share and latency of each unit");
  client.add_options(*c);
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "worker" &&
      std::string(argv[1]) != "master" && std::string(argv[1]) != "client")
    throw InputError(std::string("unknown command '") + argv[1] +
                     "'; valid commands: client, master, worker");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::cout << (w->parsed()   ? w->help()
                    : m->parsed() ? m->help()
                    : c->parsed() ? c->help()
                                  : app.help());
      return kExitOk;
    }
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  if (w->parsed()) return worker.run();
  if (c->parsed()) return client.run();
  return master.run();
}

}  // namespace igb::options
