// igb-tools thin: removes a checkpoint's zeroed filters and channels physically.
#include <CLI/CLI.hpp>

#include <iostream>

#include "compress/thinning.h"
#include "core/checkpoint.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/thinning_recipe.h"
#include "options/common_options.h"
#include "options/tool_commands/tool_command.h"
#include "runtime/width_search.h"
#include "tools/macs.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

class ThinCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--checkpoint", checkpoint_, "Checkpoint (.ckpt) with zeroed structures")
        ->required();
    sub.add_option("--out", out_, "Thinned checkpoint to write")->required();
    sub.add_option("--kind", kind_, "filters (remove_filters), channels (remove_channels), or both")
        ->capture_default_str()
        ->check(CLI::IsMember({"filters", "channels", "both"}));
    sub.add_option("--round-to", round_to_,
                   "Keep zeroed channels so each thinned width is a multiple of N, or 'auto': "
                   "the width each layer runs fastest at, timed on the inference form "
                   "(1: remove every zeroed channel)")
        ->capture_default_str();
    add_threads_option(sub, threads_);
  }
  void check_outputs() const override { check_output_file("--out", out_); }
  int run() override {
    configure_runtime(threads_, "cpu");
    if (fs::absolute(out_) == fs::absolute(checkpoint_))
      throw InputError("--out must differ from --checkpoint; the original checkpoint is kept");
    const auto width = width_policy();
    auto ckpt = Checkpoint::load(checkpoint_);
    auto m = load_tool_model("", {}, checkpoint_, "");
    const auto before = tools::compute_macs(tool_graph(m, m.input), *m.model);
    auto meta = ckpt.meta();
    Logger logger;
    const auto done = thin(m, width, &meta.thinning_recipes, &logger);
    if (done.removed == 0 && done.rounded > 0)
      throw InputError(checkpoint_ +
                       ": every zeroed channel group is kept to round widths (--round-to " +
                       round_to_ + "); nothing written");
    if (done.removed == 0)
      throw InputError(checkpoint_ + " has no zeroed " +
                       (kind_ == "both" ? std::string("filters or channels") : kind_) +
                       " that can be removed; nothing written");
    const auto after = tools::compute_macs(tool_graph(m, m.input), *m.model);
    // The optimizer and schedule state (masks) belong to the dense shapes: a thinned checkpoint
    // starts them afresh when training resumes from it.
    CheckpointParts parts;
    parts.model = m.model.get();
    save_checkpoint(out_, meta, parts);
    Table t;
    t.columns = {"", "Before", "After", "Ratio"};
    auto ratio = [](int64_t a, int64_t b) {
      return b ? fixed(static_cast<double>(a) / static_cast<double>(b), 3) : "-";
    };
    t.rows.push_back({"MACs", std::to_string(before.total_macs), std::to_string(after.total_macs),
                      ratio(after.total_macs, before.total_macs)});
    t.rows.push_back({"Parameters", std::to_string(before.total_params),
                      std::to_string(after.total_params),
                      ratio(after.total_params, before.total_params)});
    if (done.rounded > 0) add_unrounded_column(t, before, after);
    std::cout << "Thinned " << m.name << ": removed " << done.removed << " channel groups";
    if (done.rounded > 0)
      std::cout << ", kept " << done.rounded << " zeroed groups to round widths (--round-to "
                << round_to_ << ")";
    std::cout << "\n\n" << t.to_text() << "wrote " << out_ << "\n";
    return kExitOk;
  }

 private:
  struct Thinned {
    int64_t removed = 0, rounded = 0;
  };

  compress::WidthPolicy width_policy() const {
    if (round_to_ == "auto") return runtime::fastest_widths();
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(round_to_, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != round_to_.size() || n < 1)
      throw InputError("--round-to must be a positive integer or auto, got '" + round_to_ + "'");
    return n == 1 ? compress::WidthPolicy() : compress::round_to_multiple(n);
  }

  /// Runs the thinning passes --kind asks for on `m`; recipes and log lines go where given.
  Thinned thin(ToolModel& m, const compress::WidthPolicy& width, nlohmann::json* recipes,
               Logger* logger) const {
    Thinned done;
    for (const auto kind : {compress::ThinningKind::kFilters, compress::ThinningKind::kChannels}) {
      if ((kind == compress::ThinningKind::kFilters && kind_ == "channels") ||
          (kind == compress::ThinningKind::kChannels && kind_ == "filters"))
        continue;
      const auto plan = compress::plan_thinning(*m.model, tool_graph(m, m.input), kind, width);
      if (logger)
        for (const auto& line : plan.log) logger->info(line);  // what went, what stayed and why
      if (plan.empty()) continue;
      apply_thinning_recipe(*m.model, plan.recipe, checkpoint_);
      if (recipes) recipes->push_back(plan.recipe);
      done.removed += plan.removed_groups;
      done.rounded += plan.rounded_groups;
    }
    return done;
  }

  /// What thinning without rounding would leave, and the share of its MAC saving rounding gives
  /// up.
  void add_unrounded_column(Table& t, const tools::MacsSummary& before,
                            const tools::MacsSummary& after) const {
    auto plain = load_tool_model("", {}, checkpoint_, "");
    thin(plain, {}, nullptr, nullptr);
    const auto unrounded = tools::compute_macs(tool_graph(plain, plain.input), *plain.model);
    t.columns.push_back("Without rounding");
    t.rows[0].push_back(std::to_string(unrounded.total_macs));
    t.rows[1].push_back(std::to_string(unrounded.total_params));
    const int64_t saving = before.total_macs - unrounded.total_macs;
    const double given_up =
        saving > 0 ? static_cast<double>(after.total_macs - unrounded.total_macs) / saving : 0.0;
    t.columns.push_back("MAC saving given up");
    t.rows[0].push_back(fixed(100 * given_up, 1) + "%");
    t.rows[1].push_back("");
  }

  std::string checkpoint_, out_, kind_ = "both", round_to_ = "1";
  int64_t threads_ = 0;
};

}  // namespace

void add_thin_command(Registry<ToolCommandSpec>& r) {
  r.add("thin", {[] { return std::make_unique<ThinCommand>(); }},
        "Physically remove zeroed filters and channels from a checkpoint's model");
}

}  // namespace igb::options
