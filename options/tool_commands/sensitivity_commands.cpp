#include "options/tool_commands/sensitivity_commands.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <limits>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/progress.h"
#include "core/table.h"
#include "models/family.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"
#include "tools/schedule_suggestion.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

/// Up to `n` of `levels`, spread evenly, the first and the last included.
std::vector<size_t> shown_levels(size_t count, size_t n) {
  std::vector<size_t> idx;
  if (count <= n) {
    for (size_t i = 0; i < count; ++i) idx.push_back(i);
    return idx;
  }
  for (size_t i = 0; i < n; ++i) {
    const size_t j = (i * (count - 1) + (n - 1) / 2) / (n - 1);
    if (idx.empty() || idx.back() != j) idx.push_back(j);
  }
  return idx;
}

}  // namespace

namespace {

/// The sweep's progress: a status line on a terminal, else a log line every tenth of the sweep.
class SweepProgress {
 public:
  explicit SweepProgress(Logger& logger)
      : logger_(logger),
        terminal_(Progress::stderr_is_terminal()),
        t0_(std::chrono::steady_clock::now()) {}
  ~SweepProgress() {
    if (line_shown_) std::fprintf(stderr, "\r\033[K");
  }

  void operator()(const std::string& p, double level, int64_t done, int64_t total) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double eta =
        done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total - done) : 0;
    char line[512];
    std::snprintf(line, sizeof line, "sensitivity %lld/%lld  %s at %.2f  eta %s",
                  static_cast<long long>(done + 1), static_cast<long long>(total),
                  p.empty() ? "baseline" : p.c_str(), level,
                  done > 0 ? format_duration(eta).c_str() : "-");
    if (terminal_) {
      std::fprintf(stderr, "\r\033[K%s", line);
      std::fflush(stderr);
      line_shown_ = true;
    } else if (done >= next_log_) {
      logger_.info(line);
      next_log_ = done + std::max<int64_t>(1, total / 10);
    }
  }

 private:
  Logger& logger_;
  bool terminal_, line_shown_ = false;
  std::chrono::steady_clock::time_point t0_;
  int64_t next_log_ = 0;
};

/// The evaluation of a sweep: the model's family's evaluator on the sweep's data. With --metric,
/// the model is evaluated once first, so a metric the evaluation does not have is refused before
/// the sweep starts.
std::function<tools::SensitivityMetrics()> sweep_evaluation(const SensitivityArgs& args,
                                                            const ToolModel& m,
                                                            const c10::Device& device,
                                                            std::string& loaded) {
  models::EvalData data;
  data.data = args.data;
  data.batches = args.eval_batches;
  data.run_config = m.run_config;
  data.max_image_pixels = args.max_image_pixels;
  std::shared_ptr<models::Evaluator> evaluator =
      models::family_of_model(m.name, *m.model).make_evaluator(*m.model, data, device);
  loaded = evaluator->description();
  auto evaluate = [evaluator, model = m.model] {
    return models::evaluate_model(*evaluator, *model).metrics;
  };
  if (!args.metric.empty()) {
    std::vector<std::string> names;
    for (const auto& [name, value] : evaluate()) names.push_back(name);
    if (std::find(names.begin(), names.end(), args.metric) == names.end())
      throw InputError("--metric " + args.metric +
                       " is not one of the evaluation's: " + join(names));
  }
  return evaluate;
}

/// `metric` at a few levels per parameter, the baseline and the time taken.
void print_sweep(const tools::SensitivityResult& r, const std::string& metric) {
  const auto it = std::find(r.metrics.begin(), r.metrics.end(), metric);
  if (it == r.metrics.end())
    throw InputError("--metric " + metric + " is not one of the sweep's: " + join(r.metrics));
  const size_t k = static_cast<size_t>(it - r.metrics.begin());
  const auto shown = shown_levels(r.levels.size(), 6);
  Table table;
  table.columns = {"Parameter"};
  for (size_t i : shown) table.columns.push_back(metric + " @" + fixed(r.levels[i], 2));
  for (size_t p = 0; p < r.parameters.size(); ++p) {
    std::vector<std::string> row = {r.parameters[p]};
    for (size_t i : shown)
      row.push_back(fixed(r.rows[p * r.levels.size() + i].metrics[k].second, 3));
    table.rows.push_back(row);
  }
  std::cout << table.to_text();
  std::cout << "baseline " << metric << " " << fixed(r.baseline[k].second, 3) << "; "
            << r.evaluations << " evaluations in " << format_duration(r.seconds) << " ("
            << fixed(r.evaluation_seconds / std::max(r.seconds, 1e-9) * 100, 1)
            << "% of it evaluating)\n";
}

}  // namespace

tools::SensitivityResult sweep_checkpoint(const SensitivityArgs& args, const c10::Device& device,
                                          Logger& logger) {
  const auto options = tools::SensitivityOptions()
                           .mode(tools::parse_sensitivity_mode(args.mode))
                           .levels(tools::parse_sensitivity_levels(args.levels))
                           .params(args.params)
                           .with_dependencies(args.with_dependencies);
  tools::check_sensitivity_options(options);  // before the model is loaded and evaluated
  auto m = load_tool_model("", {}, args.checkpoint, "");
  const auto graph = tool_graph(m, m.input);
  m.model->to(device);
  m.model->eval();
  std::string loaded;
  const auto evaluate = sweep_evaluation(args, m, device, loaded);
  const auto parameters = tools::sensitivity_parameters(*m.model, graph, options);
  logger.info("sensitivity of " + args.checkpoint + " (" + m.name +
              "): " + std::to_string(parameters.size()) + " parameters x " +
              std::to_string(options.levels().size()) + " levels, " + args.mode + " pruning" +
              (args.with_dependencies ? " with dependencies" : "") + ", on " + loaded);
  tools::SensitivityResult r;
  {
    SweepProgress progress(logger);
    r = tools::sensitivity_sweep(*m.model, graph, options, evaluate, std::ref(progress));
  }
  // The primary metric (or --metric) at a few levels, per parameter.
  const std::string metric = args.metric.empty() ? r.metrics.front() : args.metric;
  print_sweep(r, metric);
  for (const auto& path : tools::write_sensitivity(r, args.out, metric))
    std::cout << "wrote " << path.string() << "\n";
  return r;
}

namespace {

class SensitivityCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--checkpoint", args_.checkpoint, "Checkpoint (.ckpt) to analyse")->required();
    sub.add_option("--data", args_.data, "'synthetic' or a data folder (evaluation split)")
        ->capture_default_str();
    sub.add_option("--mode", args_.mode, "element, filter or channel")
        ->capture_default_str()
        ->check(CLI::IsMember({"element", "filter", "channel"}));
    sub.add_option("--levels", args_.levels, "FROM:TO:STEP or a comma-separated list, in [0, 1)")
        ->capture_default_str();
    sub.add_option("--params", args_.params,
                   "Regex: only the weights whose name it matches (default: every conv and "
                   "linear weight)");
    int_range(sub.add_option("--eval-batches", args_.eval_batches,
                             "Batches of the evaluation data per evaluation (classify: 128 "
                             "images; sr, deblur: one image); 0 = all")
                  ->capture_default_str(),
              0, 1000000);
    sub.add_flag("--with-dependencies", args_.with_dependencies,
                 "With --mode filter: also zero what thinning removes with each filter (bias, "
                 "norm entries, residual partners, the consumers' input channels)");
    sub.add_option("--metric", args_.metric,
                   "The metric plotted and tabulated (default the family's primary one)");
    sub.add_option("--out", args_.out, "Folder for the reports")->required();
    int_range(sub.add_option("--max-image-pixels", args_.max_image_pixels,
                             "Largest image read, in pixels (width x height)")
                  ->capture_default_str(),
              1, std::numeric_limits<int64_t>::max());
    add_threads_option(sub, threads_);
    sub.add_option("--device", device_, "cpu, cuda or cuda:N")
        ->capture_default_str()
        ->check(CLI::IsMember({"cpu", "cuda"}));
  }
  void check_outputs() const override { check_output_folder("--out", args_.out); }
  int run() override {
    const c10::Device device = configure_runtime(threads_, device_);
    Logger logger;
    sweep_checkpoint(args_, device, logger);
    return kExitOk;
  }

 private:
  SensitivityArgs args_;
  int64_t threads_ = 0;
  std::string device_ = "cpu";
};

class SuggestScheduleCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--sensitivity", table_, "sensitivity.csv of igb-tools sensitivity")->required();
    real_range(
        sub.add_option("--max-drop", max_drop_, "Largest drop of the metric allowed per parameter")
            ->capture_default_str(),
        0, 1e9);
    sub.add_option("--metric", suggest_metric_, "The budget's metric (default the first)");
    sub.add_option("--kind", kind_, "agp or sensitivity")
        ->capture_default_str()
        ->check(CLI::IsMember({"agp", "sensitivity"}));
    sub.add_option("--epochs", epochs_, "START:END of the pruning policies")->required();
    int_range(sub.add_option("--frequency", frequency_, "AGP's frequency in epochs")
                  ->capture_default_str(),
              1, 1000000);
    sub.add_option("--checkpoint", checkpoint_,
                   "With --kind sensitivity: the swept checkpoint, so each s of std(w) comes "
                   "from its weights instead of a normal approximation");
    sub.add_option("--out", suggest_out_, "The schedule (.yaml) to write")->required();
  }
  void check_outputs() const override { check_output_file("--out", suggest_out_); }
  int run() override {
    tools::SuggestOptions o;
    const auto colon = epochs_.find(':');
    try {
      if (colon == std::string::npos) throw std::invalid_argument("no colon");
      size_t a = 0, b = 0;
      o.start_epoch = std::stoll(epochs_.substr(0, colon), &a);
      o.end_epoch = std::stoll(epochs_.substr(colon + 1), &b);
      if (a != colon || b != epochs_.size() - colon - 1) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw InputError("--epochs '" + epochs_ + "' is not START:END (two whole numbers)");
    }
    o.max_drop = max_drop_;
    o.metric = suggest_metric_;
    o.kind = kind_;
    o.frequency = frequency_;
    o.source = fs::path(table_).filename().string();
    const auto table = tools::read_sensitivity_csv(table_);
    if (!checkpoint_.empty()) {
      if (kind_ != "sensitivity") throw InputError("--checkpoint applies to --kind sensitivity");
      auto m = load_tool_model("", {}, checkpoint_, "");
      for (const auto& p : m.model->named_parameters()) o.weights[p.key()] = p.value().detach();
    }
    const auto s = tools::suggest_schedule(table, o);
    Table t;
    t.columns = {"Parameter", "Sparsity", "Baseline", "Drop"};
    for (const auto& c : s.choices)
      t.rows.push_back({c.parameter, fixed(c.sparsity, 2), fixed(c.baseline, 4), fixed(c.drop, 4)});
    std::cout << t.to_text();
    write_text_atomically(suggest_out_, s.yaml);
    std::cout << "wrote " << suggest_out_ << "\n";
    return kExitOk;
  }

 private:
  std::string table_, suggest_out_, suggest_metric_, kind_ = "agp", epochs_, checkpoint_;
  double max_drop_ = 0.3;
  int64_t frequency_ = 1;
};

}  // namespace

void add_sensitivity_commands(Registry<ToolCommandSpec>& r) {
  r.add("sensitivity", {[] { return std::make_unique<SensitivityCommand>(); }},
        "Prune each weight one-shot at each level and evaluate: sensitivity.csv/.json/.svg/.png");
  r.add("suggest-schedule", {[] { return std::make_unique<SuggestScheduleCommand>(); }},
        "Turn a sensitivity.csv into a pruning schedule within a metric budget per parameter");
}

}  // namespace igb::options
