// igb-tools early-exit: label-free exit thresholds calibrated on held-out data to a target, then
// the deployed cascade (each batch split at every exit, only undecided samples run on) measured
// on a separate set: accuracy, expected and measured MACs, latency against the final exit alone,
// and the accuracy-against-MACs curve.
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>

#include "core/checkpoint.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "data/classify_data.h"
#include "deploy/early_exit/cascade_timing.h"
#include "deploy/early_exit/exit_calibration.h"
#include "deploy/early_exit/exit_export.h"
#include "deploy/early_exit/exit_network.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/tool_commands/tool_command.h"
#include "tools/plot.h"
#include "tools/report.h"

namespace igb::options {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using deploy::ExitNetwork;
using deploy::ExitTable;
using deploy::LabelledBatches;
using deploy::OperatingPoint;

LabelledBatches batches_of(const data::Dataset& d, const std::vector<int64_t>& indices,
                           int64_t batch, std::string description) {
  LabelledBatches s;
  s.description = std::move(description);
  for (size_t i = 0; i < indices.size(); i += static_cast<size_t>(batch)) {
    std::vector<at::Tensor> xs, ys;
    for (size_t j = i; j < std::min(indices.size(), i + static_cast<size_t>(batch)); ++j) {
      const auto ex = d.get(indices[j], 0);
      xs.push_back(ex.input);
      ys.push_back(ex.target.reshape({1}));
    }
    s.inputs.push_back(at::stack(xs));
    s.targets.push_back(at::cat(ys));
  }
  return s;
}

/// The calibration set and the report set: the data's validation and test splits, or, when it has
/// one evaluation split only, its even and odd samples.
std::pair<LabelledBatches, LabelledBatches> load_splits(const std::string& data,
                                                        const std::string& dataset,
                                                        const graph::Shape& input, int64_t batch,
                                                        int64_t max_pixels, int64_t max_samples) {
  data::ClassifyDataOptions o;
  o.dataset = dataset;
  o.input_shape = input;
  o.seed = 0;
  o.synthetic_train = 1;
  o.max_image_pixels = max_pixels;
  o.test_split = false;
  auto val = data::load_classify_data(data, o);
  o.test_split = true;
  auto test = data::load_classify_data(data, o);
  // --max-samples keeps a fixed random subset, in the data's order.
  const auto cap = [max_samples](std::vector<int64_t> v) {
    if (max_samples > 0 && static_cast<int64_t>(v.size()) > max_samples) {
      std::shuffle(v.begin(), v.end(), std::mt19937(7));
      v.resize(static_cast<size_t>(max_samples));
    }
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<int64_t> all(static_cast<size_t>(test.val->size()));
  std::iota(all.begin(), all.end(), 0);
  if (val.description != test.description) {
    std::vector<int64_t> cal(static_cast<size_t>(val.val->size()));
    std::iota(cal.begin(), cal.end(), 0);
    return {batches_of(*val.val, cap(cal), batch, "the validation split of " + val.description),
            batches_of(*test.val, cap(all), batch, "the test split of " + test.description)};
  }
  // One evaluation split: a fixed random half each (not every other sample: datasets stored
  // class by class in turn would give each half its own classes).
  std::shuffle(all.begin(), all.end(), std::mt19937(20240601));
  const auto half = static_cast<std::ptrdiff_t>(all.size() / 2);
  return {batches_of(*test.val, cap({all.begin(), all.begin() + half}), batch,
                     "a fixed random half of " + test.description),
          batches_of(*test.val, cap({all.begin() + half, all.end()}), batch,
                     "the other half of " + test.description)};
}

/// Table per exit on the report set, then the totals; JSON of everything.
tools::Report exit_report(const ExitNetwork& net, const OperatingPoint& p, double final_top1,
                          const deploy::CascadeTiming& m, deploy::ExitCriterion criterion) {
  tools::Report r;
  r.title = "Early exit (" + deploy::exit_criterion_name(criterion) + ") on the report set";
  r.table.columns = {"Exit", "Threshold", "MACs to leave", "Leaving (%)", "Top1 of those (%)"};
  json exits = json::array();
  for (size_t e = 0; e < net.exits(); ++e) {
    const bool early = e + 1 < net.exits();
    const std::string th =
        early ? (std::isinf(p.thresholds[e])
                     ? std::string("never")
                     : fixed(deploy::natural_threshold(criterion, p.thresholds[e]), 4))
              : "-";
    r.table.rows.push_back({net.exit_names()[e], th, tools::grouped(net.exit_macs()[e]),
                            fixed(p.share[e], 2), fixed(p.exit_top1[e], 2)});
    exits.push_back({{"exit", net.exit_names()[e]},
                     {"threshold", early && !std::isinf(p.thresholds[e])
                                       ? json(deploy::natural_threshold(criterion, p.thresholds[e]))
                                       : json(nullptr)},
                     {"macs", net.exit_macs()[e]},
                     {"head_macs", net.head_macs()[e]},
                     {"share_pct", p.share[e]},
                     {"top1", p.exit_top1[e]}});
  }
  const double latency_saving = 100.0 * (1.0 - m.cascade_ms / m.final_ms);
  r.footer = {
      "top1: final exit alone " + fixed(final_top1, 2) + " %, with early exits " +
          fixed(p.top1, 2) + " % (" + fixed(p.top1 - final_top1, 2) + " points)",
      "mean MACs: " + tools::grouped(static_cast<int64_t>(std::llround(p.mean_macs))) + " of " +
          tools::grouped(net.model_macs()) + " (" + fixed(p.macs_saving, 1) + " % saved)",
      "latency per sample: final exit alone " + fixed(m.final_ms, 3) + " ms, with early exits " +
          fixed(m.cascade_ms, 3) + " ms (" + fixed(latency_saving, 1) + " % saved; " +
          fixed(p.macs_saving > 0 ? latency_saving / p.macs_saving : 0.0, 2) +
          " of the MAC saving); the model's own forward " + fixed(m.native_ms, 3) + " ms",
      "decisions of the cascade that differ from every exit computed on every sample: " +
          std::to_string(m.disagreements)};
  r.json = {{"criterion", deploy::exit_criterion_name(criterion)},
            {"exits", exits},
            {"final_top1", final_top1},
            {"top1", p.top1},
            {"mean_macs", p.mean_macs},
            {"model_macs", net.model_macs()},
            {"macs_saving_pct", p.macs_saving},
            {"final_ms_per_sample", m.final_ms},
            {"cascade_ms_per_sample", m.cascade_ms},
            {"native_ms_per_sample", m.native_ms},
            {"latency_saving_pct", latency_saving},
            {"disagreements", m.disagreements}};
  return r;
}

/// curve.csv, curve.svg and curve.png: top-1 against mean MACs over one common threshold, with
/// the calibrated point and the final exit alone.
void write_curve(const fs::path& dir, const std::vector<OperatingPoint>& curve,
                 const OperatingPoint& point, double final_top1, int64_t model_macs,
                 deploy::ExitCriterion criterion) {
  std::string csv = "threshold,mean_macs,macs_saving_pct,top1\n";
  tools::PlotSeries line{"one threshold for every exit", {}, {}, true, {}};
  for (const auto& p : curve) {
    const double th = p.thresholds.empty() ? 0.0 : p.thresholds[0];
    csv += (std::isinf(th) ? std::string("never")
                           : fixed(deploy::natural_threshold(criterion, th), 6)) +
           "," + fixed(p.mean_macs, 0) + "," + fixed(p.macs_saving, 3) + "," + fixed(p.top1, 3) +
           "\n";
    line.x.push_back(p.mean_macs / 1e6);
    line.y.push_back(p.top1);
  }
  write_text_atomically(dir / "curve.csv", csv);
  tools::LinePlot plot;
  plot.title =
      "Early exit: top-1 against mean MACs (" + deploy::exit_criterion_name(criterion) + ")";
  plot.x_label = "mean MACs per sample (M)";
  plot.y_label = "top-1 (%)";
  plot.series = {
      line,
      {"calibrated thresholds", {point.mean_macs / 1e6}, {point.top1}, false, {}},
      {"final exit alone", {static_cast<double>(model_macs) / 1e6}, {final_top1}, false, {}}};
  write_text_atomically(dir / "curve.svg", tools::line_plot_svg(plot));
  write_text_atomically(dir / "curve.png", tools::line_plot_png(plot));
}

class EarlyExitCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--checkpoint", checkpoint_, "Checkpoint of an early-exit classifier")
        ->required();
    sub.add_option("--data", data_,
                   "Labelled data: digits, synthetic, a CIFAR-10 or MNIST "
                   "folder, an image folder")
        ->capture_default_str();
    sub.add_option("--dataset", dataset_, "Force the dataset format")->capture_default_str();
    sub.add_option("--exit-criterion", criterion_,
                   "Confidence of an exit: max-softmax, entropy, or label-loss (Distiller's, "
                   "which reads the label)")
        ->capture_default_str()
        ->check(CLI::IsMember({"max-softmax", "entropy", "label-loss"}));
    auto* drop = real_range(sub.add_option("--target-accuracy-drop", drop_,
                                           "Calibrate for the least MACs within this many points "
                                           "of top-1 below the final exit (default 1)"),
                            0, 100);
    auto* macs = real_range(sub.add_option("--target-macs", macs_,
                                           "Calibrate instead for the best top-1 within this "
                                           "fraction of the model's MACs"),
                            0, 1, /*min_excluded=*/true);
    drop->excludes(macs);
    int_range(sub.add_option("--batch-size", batch_,
                             "Samples per batch of the cascade and of its latency")
                  ->capture_default_str(),
              1, 4096);
    int_range(sub.add_option("--repeats", repeats_, "Timed passes over the report set (best)")
                  ->capture_default_str(),
              1, 100);
    int_range(
        sub.add_option("--max-samples", max_samples_, "Use at most N samples of each set (0 = all)")
            ->capture_default_str(),
        0, 10000000);
    sub.add_option("--out", out_, "Folder for early_exit.{csv,json} and curve.{csv,svg,png}");
    sub.add_option("--save", save_, "Write the checkpoint with the calibrated thresholds here");
    sub.add_option("--export", export_,
                   "Write the segments (one ONNX file per exit, dynamic batch) and manifest.json "
                   "with the calibrated thresholds into this folder");
    add_threads_option(sub, threads_);
    add_runtime_option(sub, runtime_, {kInferenceRuntime, kInt8Runtime},
                       "How segments and heads run: inference (their inference forms) or int8 (the "
                       "same with a quantized model's layers in integers; docs/int8.md)");
  }
  void check_outputs() const override {
    if (!out_.empty()) check_output_folder("--out", out_);
    if (!save_.empty()) check_output_file("--save", save_);
    if (!export_.empty()) check_output_folder("--export", export_);
    if (!save_.empty() && fs::absolute(save_) == fs::absolute(checkpoint_))
      throw InputError("--save must differ from --checkpoint; the original checkpoint is kept");
  }
  int run() override;

 private:
  std::string checkpoint_, data_ = "digits", dataset_ = "auto", criterion_ = "max-softmax";
  std::string out_, save_, export_;
  double drop_ = 1.0, macs_ = 0;
  int64_t batch_ = 1, repeats_ = 3, threads_ = 0, max_samples_ = 0;
  std::string runtime_ = kInferenceRuntime;
};

/// The checkpoint again, its meta holding the calibration (extra.early_exit).
void save_calibrated(const std::string& from, const std::string& to, models::ModelImpl& model,
                     const json& calibration) {
  auto meta = Checkpoint::load(from).meta();
  meta.extra["early_exit"] = calibration;
  CheckpointParts parts;
  parts.model = &model;
  save_checkpoint(to, meta, parts);
}

int EarlyExitCommand::run() {
  configure_runtime(threads_, "cpu");
  Logger logger;
  auto m = load_tool_model("", {}, checkpoint_, "");
  m.model->eval();
  torch::NoGradGuard no_grad;
  const auto graph = tool_graph(m, m.input);
  const ExitNetwork net(*m.model, graph, runtime_ == kInt8Runtime);
  const auto criterion = deploy::parse_exit_criterion(criterion_);
  auto [calibration, report] =
      load_splits(data_, dataset_, m.input, 128, data::kDefaultMaxImagePixels, max_samples_);
  logger.info("calibrating on " + std::to_string(calibration.size()) + " samples (" +
              calibration.description + ")");
  const auto cal_table = deploy::exit_table(net, calibration, criterion);
  deploy::CalibrationTarget target;
  if (macs_ > 0)
    target = {deploy::CalibrationTarget::Kind::kMacs, macs_};
  else
    target = {deploy::CalibrationTarget::Kind::kAccuracyDrop, drop_};
  const auto cal = deploy::calibrate(cal_table, target);
  const std::string target_text =
      macs_ > 0 ? "mean MACs at most " + fixed(macs_, 3) + " of the model's"
                : "top-1 at most " + fixed(drop_, 2) + " points below the final exit";
  logger.info(std::string(cal.met ? "met" : "NOT met (closest point kept)") +
              " on the calibration set: " + target_text + ": top-1 " + fixed(cal.point.top1, 2) +
              " % (final exit " + fixed(deploy::final_top1(cal_table), 2) + " %), " +
              fixed(cal.point.macs_saving, 1) + " % of the MACs saved");
  logger.info("reporting on " + std::to_string(report.size()) + " samples (" + report.description +
              ")");
  const auto rep_table = deploy::exit_table(net, report, criterion);
  const auto point = deploy::operating_point(rep_table, cal.point.thresholds);
  const auto timed = deploy::rebatch(report, batch_);
  auto model = m.model;
  const auto measured = deploy::time_cascade(
      net, [model](const at::Tensor& x) { return model->forward(x); }, timed, criterion,
      point.thresholds, deploy::exit_of_samples(rep_table, point.thresholds),
      static_cast<int>(repeats_));
  auto r = exit_report(net, point, deploy::final_top1(rep_table), measured, criterion);
  r.json["calibration"] = {
      {"set", calibration.description}, {"samples", calibration.size()},
      {"target", target_text},          {"met", cal.met},
      {"top1", cal.point.top1},         {"macs_saving_pct", cal.point.macs_saving}};
  r.json["report_set"] = {{"set", report.description}, {"samples", report.size()}};
  r.json["batch_size"] = batch_;
  tools::print_report(r, std::cout);
  if (!out_.empty()) {
    fs::create_directories(out_);
    tools::write_report(r, fs::path(out_) / "early_exit.csv", fs::path(out_) / "early_exit.json");
    write_curve(out_, deploy::threshold_sweep(rep_table), point, deploy::final_top1(rep_table),
                net.model_macs(), criterion);
    logger.info("wrote " + out_ + "/early_exit.{csv,json} and curve.{csv,svg,png}");
  }
  if (!export_.empty()) {
    deploy::export_exit_segments(*m.model, graph, net, criterion, cal.point.thresholds,
                                 deploy::OnnxExportOptions().dynamic_batch(true), export_);
    logger.info("wrote " + std::to_string(net.exits()) + " segments and manifest.json to " +
                export_);
  }
  if (!save_.empty()) {
    json th = json::array();
    for (double t : cal.point.thresholds)
      th.push_back(std::isinf(t) ? json(nullptr) : json(deploy::natural_threshold(criterion, t)));
    save_calibrated(checkpoint_, save_, *m.model,
                    {{"criterion", criterion_},
                     {"thresholds", th},
                     {"exits", net.exit_names()},
                     {"target", target_text},
                     {"calibrated_on", calibration.description}});
    logger.info("wrote " + save_ + " with the calibrated thresholds");
  }
  return kExitOk;
}

}  // namespace

void add_early_exit_command(Registry<ToolCommandSpec>& r) {
  r.add("early-exit", {[] { return std::make_unique<EarlyExitCommand>(); }},
        "Calibrate label-free exit thresholds of an early-exit classifier and measure the "
        "accuracy, MACs and latency it saves");
}

}  // namespace igb::options
