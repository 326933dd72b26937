// igb-serve master: runs a plan of igb-tools partition on stage workers, sends frames, collects
// the results and measures them against the simulator (docs/serving.md).
#include <CLI/CLI.hpp>

#include <iostream>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "deploy/partition/devices_file.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/plan_file.h"
#include "deploy/serve/serve_master.h"
#include "deploy/serve/serve_session.h"
#include "deploy/serve/serve_worker.h"
#include "deploy/serve/served_chain.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/serve_commands/serve_command.h"
#include "options/tool_commands/partition_support.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class MasterCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--plan", plan_, "plan.json of igb-tools partition --out")->required();
    sub.add_option("--workers", workers_, "The workers' addresses, one per stage in chain order")
        ->delimiter(',')
        ->required();
    // The input shape is the plan's.
    sub.add_option("--model", target_.model,
                   "The plan's model: a zoo model, torchscript:PATH or onnx:PATH");
    sub.add_option("--model-arg", target_.options, "Model option KEY=VALUE (repeatable)");
    sub.add_option("--checkpoint", target_.checkpoint, "The plan's model, from a checkpoint");
    add_seed_option(sub, target_.seed);
    add_threads_option(sub, target_.threads);
    sub.add_option("--input", input_, "A video file or a folder of images (the frames)")
        ->required();
    sub.add_option("--frames", frames_, "Frames to send")->capture_default_str();
    sub.add_option("--rate", options_.rate_fps, "Frames per second (0: back to back)")
        ->capture_default_str();
    sub.add_option("--max-queue", options_.max_queue,
                   "Frames the link to the first worker holds at most (0: no limit); the next "
                   "frame waits for room")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--drop-late", drop_late_s_,
                   "With --rate: drop (and count) a frame that cannot be sent within this many "
                   "seconds of its time (0: send every frame, however late)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--mode", mode_, "full: whole tensors; diff: later frames as differences")
        ->capture_default_str();
    add_transfer_option(sub, transfer_, "Precision on the links: fp32, fp16 or int8");
    sub.add_option("--timeout", timeout_s_, "Seconds a frame's result may take")
        ->capture_default_str();
    sub.add_option("--listen", options_.listen, "HOST:PORT where results come back")
        ->capture_default_str();
    sub.add_option("--advertise", options_.advertise,
                   "The address the last worker sends results to (default: --listen's)");
    add_link_options(sub, options_.link, "the first worker");
    add_security_options(sub, security_);
    sub.add_flag("--rejoin", options_.rejoin,
                 "Take a lost worker back into the chain when it answers again (a plan is made "
                 "with it; frames not yet answered are re-sent)");
    sub.add_flag("--replan", replan_,
                 "After --replan-after frames, re-plan from the workers' measured op costs and "
                 "link throughput, and serve the rest on the new plan");
    sub.add_option("--replan-after", replan_after_, "Frames served on the first plan")
        ->capture_default_str();
    sub.add_option("--probes", probes_,
                   "Probe messages of each size timed on every hop after configuring, for the "
                   "simulator's per-message work (0: none, the simulator leaves it out)")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000));
    sub.add_option("--calibrate", calibrate_,
                   "Frames served after configuring, one at a time and then back to back, to "
                   "measure what a frame costs each process for the simulator (0: none, per-op "
                   "costs and probes only); the stream then starts afresh")
        ->capture_default_str()
        ->check(CLI::Range(0, 1000));
    sub.add_flag("--verify", verify_,
                 "Compare every result with the model's own forward pass on the frame");
    sub.add_option("--out", out_, "Folder for serve.json and serve_frames.csv");
    sub.add_option("--cache-dir", cache_dir_, "Where measured per-op costs are cached");
    add_runtime_option(sub, runtime_, {kInferenceRuntime, kInt8Runtime},
                       "What the simulator's per-op costs time, as the workers run: inference or "
                       "int8 (workers started with --runtime int8; docs/int8.md)");
  }

  void check_outputs() const override {
    if (!out_.empty()) check_output_folder("--out", out_);
  }

  int run() override {
    apply_security_options(security_);
    configure_runtime(target_.threads, "cpu");
    check_options();
    const auto plan = deploy::read_plan_file(plan_);
    if (plan.devices_file.empty()) throw InputError("--plan " + plan_ + " names no devices_file");
    target_.input = graph::shape_to_string(plan.input);
    const auto m = target_.load();
    auto model = m.model;
    model->eval();
    const auto graph = tool_graph(m, m.input);
    const graph::SummaryGraph::Forward forward = [model](const torch::Tensor& x) {
      return model->forward(x);
    };
    if (plan.model != m.name || plan.input != m.input)
      throw InputError("--plan " + plan_ + " is for " + plan.model + " at " +
                       graph::shape_to_string(plan.input) + ", not " + m.name + " at " +
                       graph::shape_to_string(m.input));
    // The optimal plan (the first of the file): its ops per device.
    const auto assignment = plan.assignment(graph);
    const auto device_names = plan.device_names();
    const auto stages = deploy::split_stages(graph, assignment, device_names);
    deploy::check_worker_count(workers_.size(), stages);  // before any cost is measured
    auto frames = read_model_frames(input_, m.input, frames_, "--input");
    Logger logger;
    deploy::ServedChain chain;
    chain.devices = deploy::load_devices_file(plan.devices_path());
    chain.precision = options_.precision;
    chain.diff = options_.diff;
    chain.costs = deploy::device_layer_costs(chain.devices, *model, graph, forward, cache_dir_,
                                             logger, runtime_ == kInt8Runtime);
    chain.measure_traffic(graph, frames);
    options_.weights = deploy::weights_digest(*model);
    deploy::ServeSession session(graph, std::move(chain), assignment, device_names,
                                 deploy::parse_objective(plan.objective), options_);
    session.configure();
    measure_chain(session);
    if (calibrate_ > 0) {
      measure_serving(session, frames);
      session.configure();
    }
    logger.info("configured " + std::to_string(stages.size()) + " workers; sending " +
                std::to_string(frames.size()) + " frames");
    if (replan_) session.replan(frames, replan_after_, logger);
    const auto result = session.serve(frames, [&](int done, int total) {
      if (done % 50 == 0 || done == total)
        logger.info(std::to_string(done) + "/" + std::to_string(total) + " frames served");
    });
    const double max_diff = verify_ ? verify(model, frames, result) : -1;
    report(session.stages(), result,
           session.simulate(static_cast<int>(frames.size()), options_.rate_fps), max_diff,
           session.simulated_compute_ms());
    return kExitOk;
  }

 private:
  /// What the simulator takes from the configured chain: each hop's per-message work (probed;
  /// --probes 0 leaves it out) and which workers share a machine (their reports).
  void measure_chain(deploy::ServeSession& session) {
    hops_ = session.measure_chain(probes_);
    if (probes_ < 1) return;
    Table t;
    t.columns = {"From",           "To", "Per message (ms)", "Per MB (ms)", "CPU per message (ms)",
                 "CPU per MB (ms)"};
    for (const auto& h : hops_)
      t.rows.push_back({h.from, h.to, fixed(h.message_ms, 3), fixed(h.ms_per_mb, 3),
                        fixed(h.cpu_ms, 3), fixed(h.cpu_ms_per_mb, 3)});
    std::cout << "Hops (" << probes_
              << " probes of each size: the work a message costs, and a megabyte more)\n"
              << t.to_text() << "\n";
  }

  /// What a frame costs each process, measured on --calibrate frames (the stream's first ones,
  /// over again where it is shorter) served one at a time and back to back, for the simulator.
  void measure_serving(deploy::ServeSession& session, const std::vector<at::Tensor>& frames) {
    serving_ = session.measure_serving(frames, calibrate_);
    const auto& chain = session.chain();
    const auto& stages = session.stages();
    serving_wait_ms_ = chain.serving_wait_ms;
    serving_path_share_ = chain.serving_path_share;
    const auto& a = serving_.one_at_a_time;
    const auto& b = serving_.back_to_back;
    Table t;
    t.columns = {"Process", "CPU one at a time (ms/frame)", "CPU back to back (ms/frame)",
                 "Of it computing, one at a time", "Back to back"};
    t.rows.push_back({"master", fixed(a.master_cpu_ms, 3), fixed(b.master_cpu_ms, 3), "-", "-"});
    for (size_t i = 0; i < stages.size() && i < a.worker_cpu_ms.size(); ++i)
      t.rows.push_back({"worker " + workers_[i] + " (stage " + std::to_string(i) + ")",
                        fixed(a.worker_cpu_ms[i], 3), fixed(b.worker_cpu_ms[i], 3),
                        fixed(a.compute_cpu_ms[i], 3), fixed(b.compute_cpu_ms[i], 3)});
    std::cout << "Serving costs (" << calibrate_
              << " frames one at a time, then back to back: the CPU a frame costs each process)\n"
              << t.to_text() << "one at a time a frame took " << fixed(a.latency_ms, 3)
              << " ms: the simulator puts " << fixed(100 * chain.serving_path_share, 0)
              << "% of each process's work besides computing on the frame's path";
    if (chain.serving_wait_ms > 0)
      std::cout << " and " << fixed(chain.serving_wait_ms, 3) << " ms of waits on its hops";
    std::cout << "\n\n";
  }

  static json serving_way_json(const deploy::ServingCosts::Way& w) {
    return {{"master_cpu_ms", w.master_cpu_ms},
            {"worker_cpu_ms", w.worker_cpu_ms},
            {"compute_cpu_ms", w.compute_cpu_ms},
            {"latency_ms", w.latency_ms}};
  }

  static json failovers_json(const deploy::ServeResult& r) {
    json out = json::array();
    for (const auto& f : r.failovers)
      out.push_back({{"cause", f.cause},
                     {"lost", f.lost},
                     {"rejoined", f.rejoined},
                     {"frame", f.frame},
                     {"plan", f.plan},
                     {"resent", f.resent},
                     {"detected_ms", f.detected_ms},
                     {"resumed_ms", f.resumed_ms}});
    return out;
  }

  void check_options() {
    options_.diff = diff_mode(mode_);
    if (frames_ < 1) throw InputError("--frames must be at least 1");
    if (!(timeout_s_ > 0)) throw InputError("--timeout must be positive");
    if (replan_ && frames_ < 2) throw InputError("--replan needs --frames of at least 2");
    if (replan_after_ < 1) throw InputError("--replan-after must be at least 1");
    options_.precision = deploy::parse_transfer_precision(transfer_);
    options_.timeout_ms = timeout_s_ * 1000.0;
    options_.workers = workers_;
    if (drop_late_s_ > 0 && !(options_.rate_fps > 0))
      throw InputError("--drop-late needs --rate: a frame is late against its time under the rate");
    options_.drop_late_ms = drop_late_s_ * 1000.0;
  }

  static double verify(const models::Model& model, const std::vector<at::Tensor>& frames,
                       const deploy::ServeResult& result) {
    torch::NoGradGuard no_grad;
    double max_diff = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      if (!result.dropped.empty() && result.dropped[i]) continue;
      const at::Tensor ref = model->forward(frames[i]);
      if (result.outputs[i].empty() || result.outputs[i][0].sizes() != ref.sizes())
        throw std::runtime_error("frame " + std::to_string(i) +
                                 ": the chain's output does not have the model's shape");
      max_diff = std::max(max_diff, (result.outputs[i][0] - ref).abs().max().item<double>());
    }
    return max_diff;
  }

  /// `device_ms`: what the simulator takes each device's stage to compute (its per-op costs).
  void report(const std::vector<deploy::Stage>& stages, const deploy::ServeResult& r,
              const deploy::SimulationResult& sim, double max_diff,
              const std::vector<double>& device_ms) {
    const int n = static_cast<int>(r.latency_ms.size());
    if (r.stages.size() < stages.size()) return;
    Table t;
    t.columns = {"Stage",
                 "Device",
                 "Worker",
                 "Ops",
                 "Compute (ms/frame)",
                 "CPU (ms/frame)",
                 "Simulated (ms/frame)",
                 "Queue (ms/frame)",
                 "In first (B)",
                 "In later (B/frame)"};
    for (size_t s = 0; s < stages.size(); ++s) {
      const auto& st = r.stages[s];
      t.rows.push_back(
          {std::to_string(s), stages[s].device_name, st.worker,
           std::to_string(stages[s].ops.size()), fixed(st.compute_ms / n, 3),
           fixed(st.compute_cpu_ms / n, 3),
           fixed(device_ms.at(static_cast<size_t>(stages[s].device)), 3), fixed(st.queue_ms / n, 3),
           std::to_string(r.link_bytes_first[s]),
           n > 1 ? fixed(static_cast<double>(r.link_bytes_later[s]) / (n - 1), 0) : "-"});
    }
    std::cout << (r.failovers.empty() ? "Stages\n"
                                      : "Stages (of the first plan; after a lost worker a stage "
                                        "number's figures add both plans')\n")
              << t.to_text() << "\n";
    Table s;

    s.columns = {"", "Measured", "Simulated", "Measured / simulated"};
    auto row = [&](const std::string& what, double a, double b) {
      s.rows.push_back({what, fixed(a, 3), fixed(b, 3), b > 0 ? fixed(a / b, 3) : "-"});
    };
    row("Mean latency (ms)", r.mean_latency_ms, sim.mean_latency_ms);
    row("First frame (ms)", r.latency_ms.front(), sim.latency_ms.front());
    row("Throughput (fps)", r.steady_fps, sim.steady_fps);
    std::cout << "Measured against the simulator"
              << (r.failovers.empty() ? "" : " (the first plan's, before any worker was lost)")
              << "\n"
              << s.to_text() << "\n";
    for (const auto& f : r.failovers)
      std::cout << (f.rejoined.empty() ? "lost " + join(f.lost) : "took back " + join(f.rejoined))
                << " at frame " << f.frame << " (" << f.cause << "); re-planned in "
                << fixed(f.resumed_ms - f.detected_ms, 1) << " ms onto " << f.plan << "; "
                << f.resent << " frames re-sent\n";
    if (r.dropped_count > 0)
      std::cout << r.dropped_count << " of " << n
                << " frames dropped unsent, later than --drop-late\n";
    if (!r.failovers.empty())
      std::cout << n - r.dropped_count << " frames answered, none lost; " << r.late_results_dropped
                << " late results of re-sent frames dropped\n";
    if (max_diff >= 0)
      std::cout << "--verify: largest difference from the model's forward "
                << (max_diff == 0 ? std::string("0") : fixed(max_diff, 9)) << " over " << n
                << " frames\n";
    if (!out_.empty()) write_report(stages, r, sim, max_diff, device_ms);
  }

  /// serve.json and serve_frames.csv in --out.
  void write_report(const std::vector<deploy::Stage>& stages, const deploy::ServeResult& r,
                    const deploy::SimulationResult& sim, double max_diff,
                    const std::vector<double>& device_ms) const {
    const int n = static_cast<int>(r.latency_ms.size());
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
    j["hops"] = json::array();
    for (const auto& h : hops_)
      j["hops"].push_back({{"from", h.from},
                           {"to", h.to},
                           {"message_ms", h.message_ms},
                           {"ms_per_mb", h.ms_per_mb},
                           {"cpu_ms", h.cpu_ms},
                           {"cpu_ms_per_mb", h.cpu_ms_per_mb}});
    if (serving_.frames > 0)
      j["serving"] = {{"frames", serving_.frames},
                      {"one_at_a_time", serving_way_json(serving_.one_at_a_time)},
                      {"back_to_back", serving_way_json(serving_.back_to_back)},
                      {"path_share", serving_path_share_},
                      {"wait_ms", serving_wait_ms_}};
    j["failovers"] = failovers_json(r);
    j["answered"] = n - r.dropped_count;
    j["late_results_dropped"] = r.late_results_dropped;
    j["dropped_late"] = r.dropped_count;
    for (size_t i = 0; i < stages.size(); ++i)
      j["stages"].push_back(
          {{"stage", i},
           {"device", stages[i].device_name},
           {"worker", r.stages[i].worker},
           {"compute_ms", r.stages[i].compute_ms / n},
           {"compute_cpu_ms", r.stages[i].compute_cpu_ms / n},
           {"simulated_compute_ms", device_ms.at(static_cast<size_t>(stages[i].device))},
           {"queue_ms", r.stages[i].queue_ms / n},
           {"bytes_in_first", r.link_bytes_first[i]},
           {"bytes_in_later", r.link_bytes_later[i]}});
    write_text_atomically(fs::path(out_) / "serve.json", j.dump(1) + "\n");
    std::string csv = "frame,sent_ms,done_ms,latency_ms,dropped\n";
    for (int i = 0; i < n; ++i)
      csv += std::to_string(i) + "," + fixed(r.sent_ms[i], 3) + "," + fixed(r.done_ms[i], 3) + "," +
             fixed(r.latency_ms[i], 3) + "," + (r.dropped[i] ? "1" : "0") + "\n";
    write_text_atomically(fs::path(out_) / "serve_frames.csv", csv);
    std::cout << "wrote serve.json and serve_frames.csv to " << out_ << "\n";
  }

  ToolTarget target_;
  deploy::MasterOptions options_;
  SecurityOptions security_;
  std::string plan_, input_, mode_ = "full", transfer_ = "fp32", out_, cache_dir_,
                             runtime_ = kInferenceRuntime;
  std::vector<std::string> workers_;
  int frames_ = 30;
  double timeout_s_ = 10, drop_late_s_ = 0;
  bool verify_ = false, replan_ = false;
  int replan_after_ = 1, probes_ = 20, calibrate_ = 100;
  std::vector<deploy::HopCost> hops_;
  deploy::ServingCosts serving_;
  double serving_wait_ms_ = 0, serving_path_share_ = 1;
};

}  // namespace

void add_master_command(Registry<ToolCommandSpec>& r) {
  r.add("master", {[] { return std::make_unique<MasterCommand>(); }},
        "Run a plan of igb-tools partition on workers: send frames, collect results, measure "
        "against the simulator");
}

}  // namespace igb::options
