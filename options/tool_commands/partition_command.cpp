// igb-tools partition: the optimal split of a model across a chain of devices, against the
// baselines, with a pipeline simulation, a Gantt chart and, on request, the stages as ONNX files.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <optional>

#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "deploy/partition/devices_file.h"
#include "deploy/partition/graph_problem.h"
#include "deploy/partition/layer_costs.h"
#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "deploy/partition/plan_file.h"
#include "deploy/partition/stages.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/tool_commands/partition_support.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;
using deploy::PartitionPlan;

std::string mb(double bytes) { return fixed(bytes / 1e6, 3); }

/// "conv1 … layer2.0.add (37 ops)" per device.
std::string stage_text(const deploy::PartitionProblem& p, const deploy::Assignment& a, int d) {
  int first = -1, last = -1, count = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] == d) {
      if (first < 0) first = static_cast<int>(i);
      last = static_cast<int>(i);
      ++count;
    }
  if (count == 0) return "-";
  if (count == 1) return p.nodes[first].name;
  return p.nodes[first].name + " ... " + p.nodes[last].name + " (" + std::to_string(count) + ")";
}

class PartitionCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    add_target_options(sub, target_, true);
    sub.add_option("--devices", devices_,
                   "The chain: a devices file (YAML, docs/partition.md); required unless "
                   "--write-costs");
    sub.add_option("--objective", objective_, "latency (one frame end to end) or throughput")
        ->capture_default_str()
        ->check(CLI::IsMember({"latency", "throughput"}));
    add_transfer_option(sub, transfer_, "Precision of the tensors sent: fp32, fp16 or int8");
    sub.add_option("--frames-from", frames_from_,
                   "A video file or image folder: measure each tensor's zeros (and its "
                   "frame-to-frame differences') on real frames and size transfers by the smaller "
                   "of dense and CSR");
    sub.add_option("--mode", mode_,
                   "full: every frame sends whole tensors; diff: frames after the first send "
                   "differences (needs --frames-from)")
        ->capture_default_str();
    int_range(sub.add_option("--frames", frames_, "Frames to simulate")->capture_default_str(), 1,
              100000);
    real_range(sub.add_option("--rate", rate_, "Frames per second arriving (0: back to back)")
                   ->capture_default_str(),
               0, 1e6);
    sub.add_option("--out", out_,
                   "Folder for plan.json, plan.csv, cuts.csv, gantt.svg and gantt.png");
    sub.add_option("--export", export_,
                   "Folder for every stage of the optimal plan as ONNX with manifest.json");
    sub.add_option("--write-costs", write_costs_,
                   "Measure this machine's per-op costs for the model and input and write them "
                   "(a cost file for another machine's devices file), then stop");
    sub.add_option("--cache-dir", cache_dir_, "Where measured costs are cached")
        ->capture_default_str();
    add_runtime_option(sub, runtime_, {kInferenceRuntime, kInt8Runtime},
                       "What this machine's costs time: inference (the model's inference form) or "
                       "int8 (the same with a quantized model's layers in integers; docs/int8.md)");
    sub.add_flag("--verify", verify_,
                 "Also enumerate every valid assignment (small graphs) and report the optimality "
                 "gap of the plan");
  }
  void check_outputs() const override {
    if (!out_.empty()) check_output_folder("--out", out_);
    if (!export_.empty()) check_output_folder("--export", export_);
    if (!write_costs_.empty()) check_output_file("--write-costs", write_costs_);
  }
  int run() override {
    configure_runtime(target_.threads, "cpu");
    const auto objective = deploy::parse_objective(objective_);
    in_.precision = deploy::parse_transfer_precision(transfer_);
    if (diff_mode(mode_) && frames_from_.empty())
      throw InputError("--mode diff needs --frames-from to measure the differences on");
    if (devices_.empty() && write_costs_.empty())
      throw InputError("--devices is required (a devices file, docs/partition.md)");
    const auto devices =
        write_costs_.empty() ? deploy::load_devices_file(devices_) : deploy::DevicesFile();
    const auto m = target_.load();
    auto model = m.model;
    const auto graph = tool_graph(m, m.input);
    const graph::SummaryGraph::Forward forward = [model](const torch::Tensor& x) {
      return model->forward(x);
    };
    if (!write_costs_.empty()) {
      logger_.info("measuring " + std::to_string(graph.ops().size()) + " ops of " + m.name +
                   " at " + graph::shape_to_string(m.input));
      deploy::write_layer_costs(
          deploy::measure_layer_costs(*model, graph, forward, 5, true, runtime_ == kInt8Runtime),
          write_costs_);
      std::cout << "wrote the costs of " << graph.ops().size() << " ops of " << m.name << " on "
                << deploy::this_machine() << " to " << write_costs_ << "\n";
      return kExitOk;
    }
    // The frames are read before the costs are measured, so a bad --frames-from is the only line.
    std::vector<at::Tensor> frames;
    if (!frames_from_.empty())
      frames = read_model_frames(frames_from_, m.input, 8, "--frames-from");
    deploy::check_memory_fits(graph, devices);  // nothing fits: the only line, before measuring
    in_.costs = deploy::device_layer_costs(devices, *model, graph, forward, cache_dir_, logger_,
                                           runtime_ == kInt8Runtime);
    std::map<int, deploy::ValueTraffic> traffic;
    if (!frames_from_.empty()) {
      traffic = deploy::measure_traffic(graph, frames);
      in_.traffic = &traffic;
      logger_.info("measured zero ratios on " + std::to_string(frames.size()) + " frames of " +
                   frames_from_);
    }
    const auto first = deploy::partition_problem(graph, devices, in_);
    deploy::PartitionProblem later = first;
    if (mode_ == "diff") {
      in_.differences = true;
      later = deploy::partition_problem(graph, devices, in_);
    }
    // Plan for the frames that dominate a stream: later frames (differences in diff mode).
    std::vector<PartitionPlan> plans{deploy::solve_partition(later, objective)};
    for (auto& b : deploy::baseline_plans(later, objective)) plans.push_back(std::move(b));
    if (verify_) verify(later, objective, plans.front());
    const Table table = plans_table(first, plans);
    std::cout << m.name << " " << graph::shape_to_string(m.input) << " on "
              << devices.devices.size() << " devices, objective " << objective_ << ", transfers "
              << transfer_ << (mode_ == "diff" ? " (later frames as differences)" : "") << "\n"
              << table.to_text() << "\n"
              << "Optimal plan\n"
              << stages_table(first, plans.front()).to_text() << "\n";
    deploy::SimulationOptions so;
    so.frames = frames_;
    so.rate_fps = rate_;
    const auto servers = deploy::pipeline_servers(first, later, plans.front().assignment);
    const auto sim = deploy::simulate_pipeline(servers, so);
    std::cout << "Simulated " << frames_ << " frames"
              << (rate_ > 0 ? " at " + fixed(rate_, 2) + " fps" : std::string(" back to back"))
              << ": first frame " << fixed(sim.latency_ms.front(), 3) << " ms, mean latency "
              << fixed(sim.mean_latency_ms, 3) << " ms, throughput " << fixed(sim.steady_fps, 2)
              << " fps\n";
    if (!out_.empty()) {
      write_plan(m, first, plans, table, servers, so, sim);
      write_cuts(graph, in_.precision, in_.traffic);
    }
    if (!export_.empty()) {
      const auto stages = deploy::split_stages(graph, plans.front().assignment, first.devices);
      deploy::export_stages(*model, graph, stages, deploy::OnnxExportOptions(), export_);
      std::cout << "wrote " << stages.size() << " stages and manifest.json to " << export_ << "\n";
    }
    return kExitOk;
  }

 private:
  static Table plans_table(const deploy::PartitionProblem& p,
                           const std::vector<PartitionPlan>& plans) {
    Table t;
    t.columns = {"Plan", "Latency (ms)", "Throughput (fps)", "Bottleneck (ms)"};
    for (const auto& d : p.devices) t.columns.push_back(d + " (ms)");
    for (int l = 0; l + 1 < p.device_count(); ++l)
      t.columns.push_back(p.devices[l] + "->" + p.devices[l + 1] + " (MB)");
    t.columns.push_back("Valid");
    for (const auto& plan : plans) {
      std::vector<std::string> row = {plan.method, fixed(plan.cost.latency_ms, 3),
                                      fixed(plan.cost.throughput_fps(), 2),
                                      fixed(plan.cost.bottleneck_ms, 3)};
      for (double ms : plan.cost.device_ms) row.push_back(fixed(ms, 3));
      for (double b : plan.cost.forward_bytes) row.push_back(mb(b));
      row.push_back(plan.cost.valid ? "yes" : "no: " + plan.cost.why_invalid);
      t.rows.push_back(row);
    }
    return t;
  }

  static Table stages_table(const deploy::PartitionProblem& p, const PartitionPlan& best) {
    Table t;
    t.columns = {"Device", "Ops", "ms", "Params (MB)", "Sends", "MB"};
    for (int d = 0; d < p.device_count(); ++d) {
      const bool link = d + 1 < p.device_count();
      t.rows.push_back({p.devices[d], stage_text(p, best.assignment, d),
                        fixed(best.cost.device_ms[d], 3),
                        mb(static_cast<double>(best.cost.device_param_bytes[d])),
                        link ? join(best.cost.forward_values[d]) : "",
                        link ? mb(best.cost.forward_bytes[d]) : ""});
    }
    return t;
  }

  void write_plan(const ToolModel& m, const deploy::PartitionProblem& first,
                  const std::vector<PartitionPlan>& plans, const Table& table,
                  const std::vector<deploy::PipelineServer>& servers,
                  const deploy::SimulationOptions& simulation,
                  const deploy::SimulationResult& sim) const {
    fs::create_directories(out_);
    deploy::PlanFile file;
    file.model = m.name;
    file.input = m.input;
    file.devices_file = devices_;
    file.objective = objective_;
    file.transfer = transfer_;
    file.mode = mode_;
    for (const auto& p : plans) file.plans.push_back(deploy::plan_file_entry(first, p));
    file.simulation = deploy::plan_file_simulation(simulation, sim);
    deploy::write_plan_file(file, fs::path(out_) / "plan.json");
    write_text_atomically(fs::path(out_) / "plan.csv", table.to_csv());
    const auto chart = deploy::gantt_chart(
        servers, sim, m.name + ": " + std::to_string(frames_) + " frames, optimal plan");
    write_text_atomically(fs::path(out_) / "gantt.svg", tools::gantt_svg(chart));
    write_text_atomically(fs::path(out_) / "gantt.png", tools::gantt_png(chart));
    std::cout << "wrote plan.json, plan.csv, cuts.csv, gantt.svg and gantt.png to " << out_ << "\n";
  }

  /// cuts.csv: every cut of the topological order, what crosses it and its bytes.
  void write_cuts(const graph::SummaryGraph& graph, deploy::TransferPrecision precision,
                  const std::map<int, deploy::ValueTraffic>* traffic) const {
    Table t;
    t.columns = {"Cut after",  "Tensors",    "Crossing",        "FP32 bytes", "FP16 bytes",
                 "INT8 bytes", "Zero ratio", "Diff zero ratio", "Sent bytes", "Diff sent bytes"};
    for (const auto& c : deploy::cut_traffic(graph, precision, traffic))
      t.rows.push_back({c.after.empty() ? "(input)" : c.after, std::to_string(c.tensors.size()),
                        join(c.tensors, " "), fixed(c.fp32_bytes, 0), fixed(c.fp16_bytes, 0),
                        fixed(c.int8_bytes, 0), fixed(c.zero_ratio, 4), fixed(c.diff_zero_ratio, 4),
                        fixed(c.sent_bytes, 0), fixed(c.diff_sent_bytes, 0)});
    write_text_atomically(fs::path(out_) / "cuts.csv", t.to_csv());
  }

  /// The brute-force verifier: every valid assignment, the optimum and the plan's gap to it.
  static void verify(const deploy::PartitionProblem& p, deploy::PartitionObjective objective,
                     const PartitionPlan& plan) {
    const auto brute = deploy::brute_force_plan(p, objective, 20'000'000);
    const bool lat = objective == deploy::PartitionObjective::kLatency;
    const double found = lat ? plan.cost.latency_ms : plan.cost.bottleneck_ms;
    const double best = lat ? brute.best.cost.latency_ms : brute.best.cost.bottleneck_ms;
    std::cout << "Verified by enumerating " << brute.assignments << " valid assignments: optimum "
              << fixed(best, 6) << " ms, plan " << fixed(found, 6) << " ms, gap "
              << fixed(best > 0 ? 100 * (found - best) / best : 0.0, 6) << "%\n";
  }

  Logger logger_;
  deploy::ModelPartitionInputs in_;
  ToolTarget target_;
  std::string devices_, objective_ = "latency", transfer_ = "fp32", frames_from_, mode_ = "full";
  std::string out_, export_, write_costs_, cache_dir_, runtime_ = kInferenceRuntime;
  int frames_ = 30;
  double rate_ = 0;
  bool verify_ = false;
};

}  // namespace

void add_partition_command(Registry<ToolCommandSpec>& r) {
  r.add("partition", {[] { return std::make_unique<PartitionCommand>(); }},
        "Split a model across a chain of devices: optimal plan, baselines, pipeline simulation, "
        "stage export");
}

}  // namespace igb::options
