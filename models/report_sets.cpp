#include "models/report_sets.h"

#include <algorithm>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "core/checkpoint.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "data/datasets.h"
#include "models/model_from_checkpoint.h"
#include "models/trainer.h"

namespace igb::models {

namespace fs = std::filesystem;

void add_also_eval_option(CLI::App& app, std::vector<std::string>& sets) {
  app.add_option("--also-eval", sets,
                 "Report sets scored besides --data, each under its name (photos_psnr): "
                 "synthetic, photos, or none (default: those of the two that are installed)")
      ->delimiter(',');
}

std::vector<std::string> report_set_names(const std::string& family, const std::string& data,
                                          const std::vector<std::string>& requested,
                                          const std::function<void(const std::string&)>& note) {
  std::vector<std::string> known;
  for (const auto& s : family_layout(family).report_sets) known.push_back(s.key);
  std::vector<std::string> out;
  if (requested.size() == 1 && requested.front() == "none") return out;
  if (!requested.empty()) {
    for (const auto& name : requested) {
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw InputError("--also-eval: '" + name + "' is not a report set of " + family +
                         (known.empty() ? " (it has none)" : "; valid: " + join(known) + ", none"));
      const std::string why = data::dataset_unavailable(family, name);
      if (!why.empty()) throw InputError("--also-eval " + name + ": " + why);
      if (name != data && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
    return out;
  }
  for (const auto& name : known) {
    if (name == data) continue;
    const std::string why = data::dataset_unavailable(family, name);
    if (why.empty())
      out.push_back(name);
    else if (note)
      note(name + " not evaluated: " + why);
  }
  return out;
}

nlohmann::json report_set_keys(const std::string& name, const Evaluation& ev,
                               const EvalLayout& layout) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, value] : ev.metrics) j[name + "_" + key] = value;
  for (const auto& [key, value] : ev.baseline) j[name + "_" + baseline_key(layout, key)] = value;
  return j;
}

namespace {

/// "photos (10 images): PSNR 29.24 dB, SSIM 0.8469; bicubic 28.19 dB, 0.8268"
std::string report_line(const std::string& name, const Evaluation& ev, const EvalLayout& layout) {
  std::string line = name + " (" + std::to_string(ev.count) + " images):";
  for (size_t i = 0; i < layout.columns.size(); ++i) {
    const auto& c = layout.columns[i];
    line += (i ? ", " : " ") + c.title + " " + fixed(metric(ev.metrics, c.key), c.digits);
  }
  if (!layout.baseline.empty()) {
    line += "; " + layout.baseline_phrase;
    for (size_t i = 0; i < layout.columns.size(); ++i) {
      const auto& c = layout.columns[i];
      line += (i ? ", " : " ") + fixed(metric(ev.baseline, c.key), c.digits);
    }
  }
  return line;
}

}  // namespace

void report_best_checkpoint(const std::string& family, const std::string& data,
                            const std::vector<std::string>& names, const EvaluatorFactory& make,
                            const EvalData& base, RunContext& ctx, nlohmann::json& summary) {
  if (ctx.check_only || (ctx.dist && !ctx.dist->is_main())) return;
  const fs::path best = fs::path(ctx.out_dir) / "best.ckpt";
  std::error_code ec;
  if (!fs::is_regular_file(best, ec) || !summary.is_object()) return;
  const auto& layout = family_layout(family);
  const bool own = std::any_of(layout.report_sets.begin(), layout.report_sets.end(),
                               [&](const EvalLayout::ReportSet& s) { return s.key == data; });
  if (own)
    for (const auto& c : layout.columns) {
      if (summary.contains("best_" + c.key)) summary[data + "_" + c.key] = summary["best_" + c.key];
      const std::string b = baseline_key(layout, c.key);
      if (!layout.baseline.empty() && summary.contains(b)) summary[data + "_" + b] = summary[b];
    }
  if (!names.empty()) {
    const Checkpoint ckpt = Checkpoint::load(best.string());
    Model model = model_from_checkpoint(ckpt);
    model->to(ctx.device);
    for (const auto& name : names) {
      EvalData d = base;
      d.data = name;
      d.batches = 0;
      const auto evaluator = make(*model, d, ctx.device);
      const auto ev = evaluate_model(*evaluator, *model);
      ctx.logger->info("best checkpoint (epoch " + std::to_string(ckpt.meta().epoch) + ") on " +
                       report_line(name, ev, evaluator->layout()));
      summary.update(report_set_keys(name, ev, evaluator->layout()));
    }
  }
  write_text_atomically(fs::path(ctx.out_dir) / "summary.json", summary.dump(2) + "\n");
}

}  // namespace igb::models
