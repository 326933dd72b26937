// igb-serve: the worker and master programs of a serving chain (docs/serving.md).
#include "options/serve_commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "compress/scheduler.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "deploy/early_exit/exit_network.h"
#include "deploy/partition/devices_file.h"
#include "deploy/partition/model_partition.h"
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
    sub.add_option("--model", target_.model, "The plan's model, from the zoo");
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
    sub.add_flag("--verify", verify_,
                 "Compare every result with the model's own forward pass on the frame");
    sub.add_option("--out", out_, "Folder for serve.json and serve_frames.csv");
    sub.add_option("--cache-dir", cache_dir_, "Where measured per-op costs are cached");
  }

  int run() {
    if (!out_.empty()) check_output_folder("--out", out_);
    configure_runtime(target_.threads, "cpu");
    if (mode_ != "full" && mode_ != "diff")
      throw InputError("--mode must be full or diff, not '" + mode_ + "'");
    if (frames_ < 1) throw InputError("--frames must be at least 1");
    if (!(timeout_s_ > 0)) throw InputError("--timeout must be positive");
    options_.diff = mode_ == "diff";
    options_.precision = deploy::parse_transfer_precision(transfer_);
    options_.timeout_ms = timeout_s_ * 1000.0;
    options_.workers = workers_;
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
    const json& best = plan["plans"][0];
    deploy::Assignment assignment(graph.ops().size(), -1);
    std::vector<std::string> device_names;
    for (const auto& d : best.at("devices")) {
      const int index = static_cast<int>(device_names.size());
      device_names.push_back(d.at("device").get<std::string>());
      for (const auto& op : d.at("ops")) assignment.at(graph.index(op.get<std::string>())) = index;
    }
    const auto stages = deploy::split_stages(graph, assignment, device_names);
    const auto frames = read_model_frames(input_, m.input, frames_, "--input");
    Logger logger;
    options_.weights = deploy::weights_digest(*model);
    deploy::ServeMaster master(graph, options_);
    master.configure(stages, 1);
    logger.info("configured " + std::to_string(stages.size()) + " workers; sending " +
                std::to_string(frames.size()) + " frames");
    const auto result = master.serve(frames, [&](int done, int total) {
      if (done % 50 == 0 || done == total)
        logger.info(std::to_string(done) + "/" + std::to_string(total) + " frames served");
    });
    double max_diff = -1;
    if (verify_) {
      torch::NoGradGuard no_grad;
      max_diff = 0;
      for (size_t i = 0; i < frames.size(); ++i) {
        const at::Tensor ref = model->forward(frames[i]);
        if (result.outputs[i].empty() || result.outputs[i][0].sizes() != ref.sizes())
          throw std::runtime_error("frame " + std::to_string(i) +
                                   ": the chain's output does not have the model's shape");
        max_diff = std::max(max_diff, (result.outputs[i][0] - ref).abs().max().item<double>());
      }
    }
    const auto prediction = predict(plan, *model, graph, forward, assignment, frames, logger);
    report(stages, result, prediction, max_diff);
    return kExitOk;
  }

 private:
  /// The simulator's figures for the same plan, frames and rate (docs/partition.md).
  deploy::SimulationResult predict(const json& plan, torch::nn::Module& model,
                                   const tools::SummaryGraph& graph,
                                   const tools::SummaryGraph::Forward& forward,
                                   const deploy::Assignment& assignment,
                                   const std::vector<at::Tensor>& frames, Logger& logger) {
    fs::path devices_file = plan.value("devices_file", "");
    if (devices_file.empty()) throw InputError("--plan " + plan_ + " names no devices_file");
    if (!fs::exists(devices_file) && devices_file.is_relative())
      devices_file = fs::path(plan_).parent_path() / devices_file;
    const auto devices = deploy::load_devices_file(devices_file);
    deploy::ModelPartitionInputs in;
    in.precision = options_.precision;
    in.costs = device_layer_costs(devices, model, graph, forward, cache_dir_, logger);
    std::vector<at::Tensor> sample(frames.begin(),
                                   frames.begin() + std::min<size_t>(frames.size(), 8));
    std::map<int, deploy::ValueTraffic> traffic;
    if (sample.size() >= 2) {
      traffic = deploy::measure_traffic(graph, sample);
      in.traffic = &traffic;
    }
    const auto first = deploy::partition_problem(graph, devices, in);
    auto later = first;
    if (options_.diff && in.traffic) {
      in.differences = true;
      later = deploy::partition_problem(graph, devices, in);
    }
    deploy::SimulationOptions so;
    so.frames = static_cast<int>(frames.size());
    so.rate_fps = options_.rate_fps;
    return deploy::simulate_pipeline(deploy::pipeline_servers(first, later, assignment), so);
  }

  void report(const std::vector<deploy::Stage>& stages, const deploy::ServeResult& r,
              const deploy::SimulationResult& sim, double max_diff) {
    const int n = static_cast<int>(r.latency_ms.size());
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
  bool verify_ = false;
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
  auto* w = app.add_subcommand("worker",
                               "Hold a model and run the stage a master gives it, or "
                               "one unit of an early-exit cascade");
  worker.add_options(*w);
  auto* m = app.add_subcommand("master",
                               "Run a plan of igb-tools partition on workers: send "
                               "frames, collect results, measure against the simulator");
  master.add_options(*m);
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "worker" &&
      std::string(argv[1]) != "master")
    throw InputError(std::string("unknown command '") + argv[1] +
                     "'; valid commands: master, worker");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {
      std::cout << (w->parsed() ? w->help() : m->parsed() ? m->help() : app.help());
      return kExitOk;
    }
    throw InputError(std::string(e.what()) + " (see --help)");
  }
  if (w->parsed()) return worker.run();
  return master.run();
}

}  // namespace igb::options
