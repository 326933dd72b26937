#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_context.h"
#include "models/evaluation.h"

namespace CLI {
class App;
}

namespace igb::models {

/// Adds `--also-eval LIST` (report sets, or "none"), bound to `sets`.
void add_also_eval_option(CLI::App& app, std::vector<std::string>& sets);

/// The datasets a run or test of `family` reports beside its own `data` (--also-eval):
/// `requested` when given ("none" alone: none; each must be one of the family's report sets and
/// readable here, else InputError naming the missing package); otherwise the family's report sets
/// (EvalLayout::report_sets) other than `data`, leaving out those not installed, each with a line
/// to `note` saying why.
std::vector<std::string> report_set_names(const std::string& family, const std::string& data,
                                          const std::vector<std::string>& requested,
                                          const std::function<void(const std::string&)>& note);

/// One report set's evaluation of a model, as test_summary.json and summary.json hold it: its
/// metrics and its baseline's under the set's name ("photos_psnr", "photos_bicubic_psnr").
nlohmann::json report_set_keys(const std::string& name, const Evaluation& ev,
                               const EvalLayout& layout);

/// After a training run of `family` on `data`: scores the run's best checkpoint (best.ckpt in
/// ctx.out_dir) on each report set `names` with `make` (on `base` with the set's name as its
/// data), logs a line each, adds their keys to `summary`, and the run's own set's under its name
/// too when `data` is a report set ("photos_psnr" = best_psnr), so that runs on either set
/// compare key by key; then rewrites summary.json. Nothing on a rank that does not write, or
/// when the run wrote no best.ckpt.
void report_best_checkpoint(const std::string& family, const std::string& data,
                            const std::vector<std::string>& names, const EvaluatorFactory& make,
                            const EvalData& base, RunContext& ctx, nlohmann::json& summary);

}  // namespace igb::models
