// igb-bench's report: one table comparing the runs, as text, CSV, JSON and Markdown, and plots of
// each family's primary metric against MACs and latency.
#include "options/bench/bench_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>

#include "core/fs.h"
#include "core/host.h"
#include "core/table.h"
#include "core/text.h"
#include "models/eval_layout.h"
#include "tools/plot.h"
#include "tools/report.h"

namespace igb::options {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json_or_null(const fs::path& p) {
  std::ifstream in(p);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json() : j;
}

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

json read_json(const fs::path& p) { return read_json_or_null(p); }

/// One metric column: its summary.json key and header.
struct MetricColumn {
  std::string key, header;
  int digits;
};

/// The metric columns of the plan's families, in the order the plan first names them: each
/// family's tabulated metrics but the loss, then its baseline's primary metric, then the primary
/// metric and the baseline's on each of its report sets; a column two families share is shown
/// once.
std::vector<MetricColumn> metric_columns(const BenchPlan& plan) {
  std::vector<MetricColumn> out;
  const auto add = [&](MetricColumn c) {
    for (const auto& o : out)
      if (o.key == c.key) return;
    out.push_back(std::move(c));
  };
  for (const auto& run : plan.runs) {
    const auto& layout = models::family_layout(run.optform);
    for (const auto& c : layout.columns)
      if (c.key != "loss") add({c.key, c.title, c.digits});
    const auto& p = layout.columns.front();
    if (!layout.baseline.empty())
      add({models::baseline_key(layout, p.key), layout.baseline + " " + p.title, p.digits});
    // The primary metric on each report set, and its baseline there ("Photos PSNR (dB)").
    for (const auto& set : layout.report_sets) {
      add({set.key + "_" + p.key, set.title + " " + p.title, p.digits});
      if (!layout.baseline.empty())
        add({set.key + "_" + models::baseline_key(layout, p.key),
             set.title + " " + layout.baseline + " " + p.title, p.digits});
    }
  }
  return out;
}

std::string number_or_blank(const json& j, const std::string& key, int digits) {
  return j.is_object() && j.contains(key) && j[key].is_number()
             ? fixed(j[key].get<double>(), digits)
             : "";
}

class Report {
 public:
  Report(const BenchPlan& plan, const std::vector<const BenchRunRecord*>& runs, fs::path out,
         int64_t threads)
      : plan_(plan), runs_(runs), out_(std::move(out)), threads_(threads) {}

  int write() {
    std::vector<MetricColumn> metrics;
    for (const auto& m : metric_columns(plan_))
      for (const auto* s : runs_) {
        const json summary = read_json(s->dir / "summary.json");
        if (summary.is_object() && summary.contains(m.key)) {
          metrics.push_back(m);
          break;
        }
      }
    const std::string batch = std::to_string(plan_.latency_batch);
    Table table;
    table.columns = {"Run", "Model", "Status"};
    for (const auto& m : metrics) table.columns.push_back(m.header);
    for (const char* c :
         {"Params", "Non-zero", "Sparsity (%)", "MACs", "Checkpoint (MB)", "Latency b1 (ms)"})
      table.columns.push_back(c);
    table.columns.push_back("Latency b" + batch + " (ms)");
    table.columns.push_back("Train (s)");
    // bench.csv holds plain numbers (12763136, not "12,763,136") for spreadsheets and pandas.
    Table csv;
    csv.columns = table.columns;
    json rows = json::array();
    int failed = 0;
    for (const auto* s : runs_) {
      failed += s->record.value("status", "not run") != "ok";
      rows.push_back(report_row(*s, metrics, table, csv));
    }
    write_report(table, csv, rows);
    if (failed) std::cout << failed << " of " << runs_.size() << " runs failed\n";
    return failed;
  }

  /// One run's row of the table (appended to `table`, and with plain numbers to `csv`) and of
  /// bench.json (returned).
  json report_row(const BenchRunRecord& s, const std::vector<MetricColumn>& metrics, Table& table,
                  Table& csv) const {
    const json summary = read_json(s.dir / "summary.json");
    const json& rec = s.record;
    const std::string status = rec.value("status", "not run");
    json row = {
        {"run", s.run->name},
        {"optform", s.run->optform},
        {"model", summary.is_object() ? summary.value("model", s.run->model) : s.run->model},
        {"status", status},
        {"run_dir", s.dir.string()},
        {"command", s.run->train_args()}};
    if (rec.contains("error")) row["error"] = rec["error"];
    std::vector<std::string> cells = {
        s.run->name, row["model"].get<std::string>(),
        status == "ok" ? "ok" : status + ": " + rec.value("error", "")};
    const bool ok = status == "ok" && summary.is_object();
    for (const auto& m : metrics) {
      cells.push_back(ok ? number_or_blank(summary, m.key, m.digits) : "");
      if (ok && summary.contains(m.key)) row[m.key] = summary[m.key];
    }
    if (!ok) {
      cells.resize(table.columns.size());
      table.rows.push_back(cells);
      csv.rows.push_back(cells);
      return row;
    }
    const int64_t params = summary.value("params", int64_t{0});
    const int64_t nnz = rec.value("nonzero_params", params);
    const double sparsity = 100.0 * summary.value("sparsity", 0.0);
    const int64_t macs = summary.value("macs", int64_t{0});
    const double mb = static_cast<double>(rec.value("checkpoint_bytes", int64_t{0})) / 1e6;
    const json lat = rec.value("latency_ms", json::object());
    const double b1 = lat.value("1", kNan),
                 bb = lat.value(std::to_string(plan_.latency_batch), kNan);
    const double secs = summary.value("train_seconds", kNan);
    // Each number as the table shows it and as bench.csv holds it.
    const auto same = [](const std::string& v) { return std::make_pair(v, v); };
    const std::vector<std::pair<std::string, std::string>> numbers = {
        {tools::grouped(params), std::to_string(params)},
        {tools::grouped(nnz), std::to_string(nnz)},
        same(fixed(sparsity, 2)),
        {tools::grouped(macs), std::to_string(macs)},
        same(fixed(mb, 3)),
        same(fixed(b1, 3)),
        same(fixed(bb, 3)),
        same(fixed(secs, 1))};
    std::vector<std::string> plain = cells;
    for (const auto& [shown, raw] : numbers) {
      cells.push_back(shown);
      plain.push_back(raw);
    }
    csv.rows.push_back(plain);
    row.update({{"params", params},
                {"nonzero_params", nnz},
                {"sparsity", sparsity / 100},
                {"macs", macs},
                {"macs_input", summary.value("macs_input", json::array())},
                {"checkpoint_bytes", rec.value("checkpoint_bytes", int64_t{0})},
                {"latency_ms", lat},
                {"train_seconds", secs},
                {"test", rec.value("test", json())}});
    table.rows.push_back(cells);
    return row;
  }

  /// Prints the table and writes bench.csv, bench.json, bench.md and the plots.
  void write_report(const Table& table, const Table& csv, const json& rows) const {
    const std::string cpu = cpu_name();
    const int64_t threads =
        threads_ > 0 ? threads_ : static_cast<int64_t>(std::thread::hardware_concurrency());
    const std::string measured = "latency: forward pass, median of " +
                                 std::to_string(plan_.latency_repeats) + " runs, " +
                                 std::to_string(threads) + " thread(s), " + cpu;
    std::cout << plan_.title << "\n" << table.to_text() << measured << "\n";
    write_text_atomically(out_ / "bench.csv", csv.to_csv());
    const json doc = {{"title", plan_.title},
                      {"plan", plan_.file},
                      {"cpu", cpu},
                      {"latency",
                       {{"batch_sizes", {1, plan_.latency_batch}},
                        {"repeats", plan_.latency_repeats},
                        {"threads", threads}}},
                      {"runs", rows}};
    write_text_atomically(out_ / "bench.json", doc.dump(2) + "\n");
    write_text_atomically(out_ / "bench.md", markdown(table, measured));
    plots(rows);
    std::cout << "wrote " << (out_ / "bench.csv").string() << ", bench.json, bench.md and plots in "
              << out_.string() << "\n";
  }

  std::string markdown(const Table& t, const std::string& measured) const {
    auto cell = [](std::string s) {
      for (size_t i = 0; (i = s.find('|', i)) != std::string::npos; i += 2) s.replace(i, 1, "\\|");
      return s;
    };
    std::ostringstream md;
    md << "## " << plan_.title << "\n\n|";
    for (const auto& c : t.columns) md << " " << cell(c) << " |";
    md << "\n|";
    for (size_t i = 0; i < t.columns.size(); ++i) md << (i < 3 ? "---|" : "---:|");
    md << "\n";
    for (const auto& r : t.rows) {
      md << "|";
      for (const auto& c : r) md << " " << cell(c) << " |";
      md << "\n";
    }
    md << "\n" << measured << "\n";
    return md.str();
  }

  /// Each family's primary metric against MACs and against latency at batch 1, one labelled
  /// point per run, with the family's baseline (bicubic, the blurred input) as a line.
  void plots(const json& rows) const {
    std::vector<std::string> done;
    for (const auto& run : plan_.runs) {
      const auto& layout = models::family_layout(run.optform);
      const auto& primary = layout.columns.front();
      if (std::find(done.begin(), done.end(), primary.key) != done.end()) continue;
      done.push_back(primary.key);
      std::vector<const json*> ok;
      for (const auto& r : rows)
        if (r.value("status", "") == "ok" && r.contains(primary.key)) ok.push_back(&r);
      if (ok.empty()) continue;
      for (const char* axis : {"macs", "latency"}) plot(ok, layout, axis);
    }
  }

  void plot(const std::vector<const json*>& ok, const models::EvalLayout& layout,
            const std::string& axis) const {
    const auto& primary = layout.columns.front();
    tools::LinePlot p;
    const bool macs = axis == "macs";
    p.title = plan_.title + ": " + primary.title + (macs ? " vs MACs" : " vs latency (batch 1)");
    p.x_label = macs ? "MACs (millions, log scale)" : "latency at batch 1 (ms, log scale)";
    p.log_x = true;
    p.y_label = primary.title;
    double x_lo = INFINITY, x_hi = -INFINITY;
    for (const json* r : ok) {
      tools::PlotSeries s;
      s.name = (*r)["run"].get<std::string>();
      s.lines = false;
      const double x =
          macs ? (*r)["macs"].get<double>() / 1e6 : (*r)["latency_ms"].value("1", kNan);
      s.x = {x};
      s.y = {(*r)[primary.key].get<double>()};
      s.labels = {s.name};
      x_lo = std::min(x_lo, x);
      x_hi = std::max(x_hi, x);
      p.series.push_back(s);
    }
    // The baseline of the validation images (the same for every run on the same data).
    const std::string base =
        layout.baseline.empty() ? "" : models::baseline_key(layout, primary.key);
    for (const json* q : ok) {
      if (base.empty() || !std::isfinite(x_lo)) break;
      const json summary = read_json(fs::path((*q)["run_dir"].get<std::string>()) / "summary.json");
      if (!summary.contains(base)) continue;
      tools::PlotSeries line;
      line.name = layout.baseline_phrase;
      line.x = {x_lo, x_hi};
      line.y = {summary[base].get<double>(), summary[base].get<double>()};
      p.series.push_back(line);
      break;
    }
    const std::string stem = "bench_" + primary.key + "_vs_" + axis;
    write_text_atomically(out_ / (stem + ".svg"), tools::line_plot_svg(p));
    write_text_atomically(out_ / (stem + ".png"), tools::line_plot_png(p));
  }

 private:
  const BenchPlan& plan_;
  const std::vector<const BenchRunRecord*>& runs_;
  fs::path out_;
  int64_t threads_;
};

}  // namespace

int write_bench_report(const BenchPlan& plan, const std::vector<const BenchRunRecord*>& runs,
                       const fs::path& out, int64_t threads) {
  return Report(plan, runs, out, threads).write();
}

}  // namespace igb::options
