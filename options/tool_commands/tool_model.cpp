#include "options/tool_commands/tool_model.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>

#include "core/checkpoint.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "models/model_from_checkpoint.h"
#include "tools/draw.h"
#include "tools/macs.h"
#include "tools/report.h"
#include "tools/sparsity.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

std::string gib(long double bytes) {
  return fixed(static_cast<double>(bytes / (1024.0L * 1024 * 1024)), 1) + " GiB";
}

}  // namespace

void check_input_fits(const graph::Shape& shape, const std::string& text) {
  long double values = 1;
  for (int64_t d : shape) values *= static_cast<long double>(d);
  const long double bytes = values * sizeof(float);
  const long double memory = static_cast<long double>(::sysconf(_SC_PHYS_PAGES)) *
                             static_cast<long double>(::sysconf(_SC_PAGE_SIZE));
  if (memory > 0 && bytes * 4 > memory)
    throw InputError("--input " + text + " is too large: the input alone needs " + gib(bytes) +
                     " (float32), and running the model needs several times that; this machine "
                     "has " +
                     gib(memory));
}

ToolModel load_tool_model(const std::string& model, const std::vector<std::string>& options,
                          const std::string& checkpoint, const std::string& input, int64_t seed) {
  if (model.empty() == checkpoint.empty())
    throw InputError("give either --model NAME or --checkpoint FILE");
  ToolModel m;
  if (!checkpoint.empty()) {
    if (!options.empty())
      throw InputError("--model-arg applies to --model; a checkpoint rebuilds its own model");
    auto ckpt = Checkpoint::load(checkpoint);
    m.model = models::model_from_checkpoint(ckpt);
    m.name = ckpt.meta().model;
    m.run_config = ckpt.meta().config;
  } else {
    const nlohmann::json opts = parse_model_args(options);
    torch::manual_seed(static_cast<uint64_t>(seed));
    m.model = models::create_model(model, opts);
    m.name = model;
  }
  m.input = input.empty() ? m.model->input_shape() : graph::parse_shape(input, "--input");
  check_input_fits(m.input, input);
  const auto own = m.model->input_shape();
  if (m.input.size() != own.size())
    throw InputError("--input " + input + ": " + m.name + " takes " + std::to_string(own.size()) +
                     "-D input like " + graph::shape_to_string(own));
  if (m.input[1] != own[1])
    throw InputError("--input " + input + ": " + m.name + " takes " + std::to_string(own[1]) +
                     "-channel input, like " + graph::shape_to_string(own));
  return m;
}

graph::SummaryGraph tool_graph(const ToolModel& m, const graph::Shape& input) {
  auto model = m.model;
  return graph::SummaryGraph::build(
      *model, input, [model](const torch::Tensor& x) { return model->forward(x); }, m.name);
}

tools::ModelProfile profile_and_print(const ToolModel& m, const tools::ProfileOptions& options,
                                      Logger& logger) {
  auto model = m.model;
  auto p = tools::profile_model(
      *model, m.input, [model](const torch::Tensor& x) { return model->forward(x); }, m.name,
      options, [&](const std::string& s) { logger.info(s); });
  for (const auto& r : tools::profile_reports(p, options.top)) {
    tools::print_report(r, std::cout);
    std::cout << "\n";
  }
  return p;
}

const std::vector<std::string>& summary_kinds() {
  static const std::vector<std::string> kinds = {"sparsity", "macs", "graph", "profile",
                                                 "sensitivity"};
  return kinds;
}

void write_summaries(const ToolModel& m, const std::vector<std::string>& kinds,
                     const fs::path& out_dir, Logger& logger) {
  for (const auto& k : kinds)
    if (std::find(summary_kinds().begin(), summary_kinds().end(), k) == summary_kinds().end())
      throw InputError("--summary: unknown report '" + k + "'; valid: " + join(summary_kinds()));
  fs::create_directories(out_dir);
  for (const auto& k : kinds) {
    if (k == "sparsity") {
      auto r = tools::sparsity_report(tools::model_sparsity(*m.model), m.name);
      tools::print_report(r, std::cout);
      tools::write_report(r, out_dir / "sparsity.csv", out_dir / "sparsity.json");
    } else if (k == "macs") {
      auto r = tools::macs_report(tools::compute_macs(tool_graph(m, m.input), *m.model));
      tools::print_report(r, std::cout);
      tools::write_report(r, out_dir / "macs.csv", out_dir / "macs.json");
    } else if (k == "graph") {
      auto g = tool_graph(m, m.input);
      tools::draw_graph(g, out_dir / "graph.dot", false);
      tools::draw_graph(g, out_dir / "graph.svg", false);
    } else if (k == "profile") {
      auto p = profile_and_print(m, tools::ProfileOptions(), logger);
      write_text_atomically(out_dir / "profile.json", tools::profile_json(p).dump(2) + "\n");
      write_text_atomically(out_dir / "profile_trace.json", p.chrome_trace.dump() + "\n");
    } else {
      continue;  // sensitivity needs the evaluation data: the driver runs it (sweep_checkpoint)
    }
    logger.info("summary " + k + " written to " + out_dir.string());
  }
}

}  // namespace igb::options
