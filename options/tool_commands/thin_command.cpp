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
    add_threads_option(sub, threads_);
  }
  void check_outputs() const override { check_output_file("--out", out_); }
  int run() override {
    configure_runtime(threads_, "cpu");
    if (fs::absolute(out_) == fs::absolute(checkpoint_))
      throw InputError("--out must differ from --checkpoint; the original checkpoint is kept");
    auto ckpt = Checkpoint::load(checkpoint_);
    auto m = load_tool_model("", {}, checkpoint_, "");
    const auto before = tools::compute_macs(tool_graph(m, m.input), *m.model);
    auto meta = ckpt.meta();
    int64_t removed = 0;
    Logger logger;
    for (const auto kind : {compress::ThinningKind::kFilters, compress::ThinningKind::kChannels}) {
      if ((kind == compress::ThinningKind::kFilters && kind_ == "channels") ||
          (kind == compress::ThinningKind::kChannels && kind_ == "filters"))
        continue;
      const auto plan = compress::plan_thinning(*m.model, tool_graph(m, m.input), kind);
      if (plan.empty()) {
        for (const auto& line : plan.log)
          logger.info(line);  // zeroed filters that must stay, and why
        continue;
      }
      apply_thinning_recipe(*m.model, plan.recipe, checkpoint_);
      meta.thinning_recipes.push_back(plan.recipe);
      removed += plan.removed_groups;
      for (const auto& line : plan.log) logger.info(line);
    }
    if (removed == 0)
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
    std::cout << "Thinned " << m.name << ": removed " << removed << " channel groups\n\n"
              << t.to_text();
    std::cout << "wrote " << out_ << "\n";
    return kExitOk;
  }

 private:
  std::string checkpoint_, out_, kind_ = "both";
  int64_t threads_ = 0;
};

}  // namespace

void add_thin_command(Registry<ToolCommandSpec>& r) {
  r.add("thin", {[] { return std::make_unique<ThinCommand>(); }},
        "Physically remove zeroed filters and channels from a checkpoint's model");
}

}  // namespace igb::options
