#include "options/tool_commands.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <iostream>

#include "compress/extensions.h"
#include "compress/lr_schedulers.h"
#include "compress/pruners.h"
#include "compress/quantizer.h"
#include "compress/regularizers.h"
#include "compress/scheduler.h"
#include "compress/thinning.h"
#include "core/checkpoint.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/table.h"
#include "core/thinning_recipe.h"
#include "data/datasets.h"
#include "options/common_options.h"
#include "options/optform.h"
#include "tools/draw.h"
#include "tools/export/onnx_export.h"
#include "tools/macs.h"
#include "tools/profile.h"
#include "tools/sparsity.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

std::string gib(long double bytes) {
  return fixed(static_cast<double>(bytes / (1024.0L * 1024 * 1024)), 1) + " GiB";
}

// Tracing, profiling or drawing a model holds its input and several activations of about its
// size: an input over a quarter of the machine's memory is refused before anything is allocated.
void check_input_fits(const tools::Shape& shape, const std::string& text) {
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

}  // namespace

ToolModel load_tool_model(const std::string& model, const std::vector<std::string>& options,
                          const std::string& checkpoint, const std::string& input) {
  if (model.empty() == checkpoint.empty())
    throw InputError("give either --model NAME or --checkpoint FILE");
  ToolModel m;
  if (!checkpoint.empty()) {
    if (!options.empty())
      throw InputError("--model-arg applies to --model; a checkpoint rebuilds its own model");
    auto ckpt = Checkpoint::load(checkpoint);
    m.model = models::model_from_checkpoint(ckpt);
    m.name = ckpt.meta().model;
  } else {
    const nlohmann::json opts = parse_model_args(options);
    m.model = models::create_model(model, opts);
    m.name = model;
  }
  m.input = input.empty() ? m.model->input_shape() : tools::parse_shape(input, "--input");
  check_input_fits(m.input, input);
  const auto own = m.model->input_shape();
  if (m.input.size() != own.size())
    throw InputError("--input " + input + ": " + m.name + " takes " + std::to_string(own.size()) +
                     "-D input like " + tools::shape_to_string(own));
  if (m.input[1] != own[1])
    throw InputError("--input " + input + ": " + m.name + " takes " + std::to_string(own[1]) +
                     "-channel input, like " + tools::shape_to_string(own));
  return m;
}

tools::SummaryGraph tool_graph(const ToolModel& m, const tools::Shape& input) {
  auto model = m.model;
  return tools::SummaryGraph::build(
      *model, input, [model](const torch::Tensor& x) { return model->forward(x); }, m.name);
}

namespace {

/// Profiles a tool model, logging progress, and prints its tables.
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

}  // namespace

const std::vector<std::string>& summary_kinds() {
  static const std::vector<std::string> kinds = {"sparsity", "macs", "graph", "profile"};
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
    }
    logger.info("summary " + k + " written to " + out_dir.string());
  }
}

namespace {

std::vector<int64_t> parse_batch_sizes(const std::string& text) {
  std::vector<int64_t> out;
  std::string cur;
  auto flush = [&] {
    if (cur.empty() || cur.find_first_not_of("0123456789") != std::string::npos || cur.size() > 7 ||
        std::stoll(cur) == 0)
      throw InputError("--batch-sizes '" + text +
                       "': give positive integers separated by commas, e.g. 1,16,64");
    out.push_back(std::stoll(cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == ',')
      flush();
    else
      cur += c;
  }
  flush();
  return out;
}

template <class R>
void print_registry(const R& r) {
  for (const auto& n : r.names()) std::cout << n << "\t" << r.entry(n).help << "\n";
}

}  // namespace

ToolCommands::ToolCommands(CLI::App& app) {
  list_ = app.add_subcommand("list",
                             "Print a registry: models, datasets, optforms, pruners, regularizers, "
                             "lr_schedulers, extensions, quantizers");
  list_
      ->add_option("registry", registry_,
                   "models | datasets | optforms | pruners | regularizers | lr_schedulers | "
                   "extensions | quantizers")
      ->required()
      ->check(CLI::IsMember({"models", "datasets", "optforms", "pruners", "regularizers",
                             "lr_schedulers", "extensions", "quantizers"}));

  macs_ = app.add_subcommand("macs",
                             "Per-layer MACs and parameter counts (conv, transposed conv, linear)");
  add_target(macs_, macs_target_, true);
  add_outputs(macs_, macs_out_);

  sparsity_ =
      app.add_subcommand("sparsity", "Distiller-style weight sparsity table of a checkpoint");
  add_target(sparsity_, sparsity_target_, false);
  add_outputs(sparsity_, sparsity_out_);

  draw_ = app.add_subcommand("draw", "Draw the data-flow graph with Graphviz (.svg, .png or .dot)");
  add_target(draw_, draw_target_, true);
  draw_->add_option("--out", draw_path_, "Output file: .svg, .png or .dot")->required();
  draw_->add_flag("--params", draw_params_, "Also draw parameter nodes (name and shape)");

  profile_ = app.add_subcommand("profile",
                                "Per-layer latency, output bytes and top operators per batch size");
  add_target(profile_, profile_target_, true);
  profile_->add_option("--batch-sizes", batch_sizes_, "Comma-separated batch sizes")
      ->capture_default_str();
  int_range(
      profile_->add_option("--top", top_, "Rows of the operators table")->capture_default_str(), 1,
      1000);
  int_range(
      profile_
          ->add_option("--repeats", repeats_, "Timed runs per measurement (the median is reported)")
          ->capture_default_str(),
      1, 1000);
  profile_->add_option("--trace", trace_path_,
                       "Write a Chrome trace (chrome://tracing, Perfetto) to this file");
  add_outputs(profile_, profile_out_);

  thin_ = app.add_subcommand(
      "thin", "Physically remove zeroed filters and channels from a checkpoint's model");
  thin_->add_option("--checkpoint", thin_checkpoint_, "Checkpoint (.ckpt) with zeroed structures")
      ->required();
  thin_->add_option("--out", thin_out_, "Thinned checkpoint to write")->required();
  thin_
      ->add_option("--kind", thin_kind_,
                   "filters (remove_filters), channels (remove_channels), or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"filters", "channels", "both"}));
  int_range(thin_->add_option("--threads", threads_, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);

  export_onnx_ = app.add_subcommand("export-onnx", "Export the model as an FP32 ONNX model");
  add_target(export_onnx_, onnx_target_, true);
  export_onnx_->add_option("--out", onnx_out_, "ONNX file to write (.onnx)")->required();
  export_onnx_->add_option("--opset", onnx_opset_, "ONNX opset (only 13)")->capture_default_str();
  export_onnx_->add_flag("--dynamic-batch", onnx_dynamic_batch_,
                         "Declare the batch dim as the symbol N");
  export_onnx_->add_flag("--dynamic-hw", onnx_dynamic_hw_,
                         "Declare the input's height and width as the symbols H and W");
}

void ToolCommands::add_target(CLI::App* sub, Target& t, bool model_allowed) {
  if (model_allowed) {
    sub->add_option("--model", t.model, "A model of the zoo (see igb-tools list models)");
    sub->add_option("--model-arg", t.options, "Model option KEY=VALUE (repeatable), e.g. scale=3");
    sub->add_option("--input", t.input, "Input shape NxCxHxW (default: the model's own, batch 1)");
  }
  sub->add_option("--checkpoint", t.checkpoint,
                  "A checkpoint (.ckpt); the model is rebuilt from it");
  int_range(sub->add_option("--threads", threads_, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
  if (!model_allowed) sub->get_option("--checkpoint")->required();
}

void ToolCommands::add_outputs(CLI::App* sub, Outputs& o) {
  sub->add_option("--csv", o.csv, "Also write the table as CSV to this file");
  sub->add_option("--json", o.json, "Also write the report as JSON to this file");
}

int ToolCommands::run() {
  // Every output place is checked before any work, so a bad one costs nothing and writes nothing.
  const std::pair<const char*, const std::string*> files[] = {
      {"--csv", &macs_out_.csv},     {"--json", &macs_out_.json},
      {"--csv", &sparsity_out_.csv}, {"--json", &sparsity_out_.json},
      {"--csv", &profile_out_.csv},  {"--json", &profile_out_.json},
      {"--trace", &trace_path_},     {"--out", &draw_path_},
      {"--out", &thin_out_},         {"--out", &onnx_out_}};
  for (const auto& [option, path] : files)
    if (!path->empty()) check_output_file(option, *path);
  if (export_onnx_->parsed() && onnx_opset_ != 13)
    throw InputError("--opset " + std::to_string(onnx_opset_) +
                     ": the ONNX exporter writes opset 13 only");
  configure_runtime(threads_, "cpu");
  if (list_->parsed()) return run_list();
  if (macs_->parsed()) return run_macs();
  if (sparsity_->parsed()) return run_sparsity();
  if (draw_->parsed()) return run_draw();
  if (thin_->parsed()) return run_thin();
  if (profile_->parsed()) return run_profile();
  if (export_onnx_->parsed()) return run_export_onnx();
  return kExitOk;
}

int ToolCommands::run_list() {
  if (registry_ == "models") {
    auto& r = models::model_registry();
    for (const auto& n : r.names())
      std::cout << n << "\t" << r.entry(n).factory.family << "\t" << r.entry(n).help << "\n";
  } else if (registry_ == "datasets") {
    data::register_builtin_datasets();
    auto& r = data::dataset_registry();
    for (const auto& n : r.names())
      std::cout << n << "\t" << r.entry(n).factory.selected_by << "\t" << r.entry(n).help << "\n";
  } else if (registry_ == "optforms") {
    print_registry(optform_registry());
  } else if (registry_ == "pruners") {
    print_registry(compress::pruner_registry());
  } else if (registry_ == "regularizers") {
    print_registry(compress::regularizer_registry());
  } else if (registry_ == "lr_schedulers") {
    print_registry(compress::lr_scheduler_registry());
  } else if (registry_ == "extensions") {
    print_registry(compress::extension_registry());
  } else {
    print_registry(compress::quantizer_registry());
  }
  return kExitOk;
}

int ToolCommands::run_macs() {
  auto m = load_tool_model(macs_target_.model, macs_target_.options, macs_target_.checkpoint,
                           macs_target_.input);
  auto r = tools::macs_report(tools::compute_macs(tool_graph(m, m.input), *m.model));
  tools::print_report(r, std::cout);
  tools::write_report(r, macs_out_.csv, macs_out_.json);
  return kExitOk;
}

int ToolCommands::run_sparsity() {
  auto m = load_tool_model("", {}, sparsity_target_.checkpoint, "");
  auto r = tools::sparsity_report(tools::model_sparsity(*m.model), m.name);
  tools::print_report(r, std::cout);
  tools::write_report(r, sparsity_out_.csv, sparsity_out_.json);
  return kExitOk;
}

int ToolCommands::run_draw() {
  auto m = load_tool_model(draw_target_.model, draw_target_.options, draw_target_.checkpoint,
                           draw_target_.input);
  auto g = tool_graph(m, m.input);
  tools::draw_graph(g, draw_path_, draw_params_);
  std::cout << "drew " << g.ops().size() << " ops of " << m.name << " to " << draw_path_ << "\n";
  return kExitOk;
}

int ToolCommands::run_profile() {
  tools::ProfileOptions po;
  po.batch_sizes = parse_batch_sizes(batch_sizes_);
  po.top = top_;
  po.repeats = repeats_;
  auto m = load_tool_model(profile_target_.model, profile_target_.options,
                           profile_target_.checkpoint, profile_target_.input);
  Logger logger;
  auto p = profile_and_print(m, po, logger);
  if (!profile_out_.csv.empty()) {
    // One CSV of every layer at every batch size.
    Table t;
    t.columns = {"Batch", "Name", "Type", "Output", "Output bytes", "Forward (ms)", "Fwd+Bwd (ms)"};
    for (const auto& b : p.batches)
      for (const auto& l : b.layers)
        t.rows.push_back({std::to_string(b.batch), l.name, l.type, tools::shape_to_string(l.output),
                          std::to_string(l.output_bytes), fixed(l.forward_ms, 4),
                          fixed(l.forward_backward_ms, 4)});
    write_text_atomically(profile_out_.csv, t.to_csv());
  }
  if (!profile_out_.json.empty())
    write_text_atomically(profile_out_.json, tools::profile_json(p).dump(2) + "\n");
  if (!trace_path_.empty()) write_text_atomically(trace_path_, p.chrome_trace.dump() + "\n");
  return kExitOk;
}

int ToolCommands::run_thin() {
  if (fs::absolute(thin_out_) == fs::absolute(thin_checkpoint_))
    throw InputError("--out must differ from --checkpoint; the original checkpoint is kept");
  auto ckpt = Checkpoint::load(thin_checkpoint_);
  auto m = load_tool_model("", {}, thin_checkpoint_, "");
  const auto before = tools::compute_macs(tool_graph(m, m.input), *m.model);
  auto meta = ckpt.meta();
  int64_t removed = 0;
  Logger logger;
  for (const auto kind : {compress::ThinningKind::kFilters, compress::ThinningKind::kChannels}) {
    if ((kind == compress::ThinningKind::kFilters && thin_kind_ == "channels") ||
        (kind == compress::ThinningKind::kChannels && thin_kind_ == "filters"))
      continue;
    const auto plan = compress::plan_thinning(*m.model, tool_graph(m, m.input), kind);
    if (plan.empty()) {
      for (const auto& line : plan.log)
        logger.info(line);  // zeroed filters that must stay, and why
      continue;
    }
    apply_thinning_recipe(*m.model, plan.recipe, thin_checkpoint_);
    meta.thinning_recipes.push_back(plan.recipe);
    removed += plan.removed_groups;
    for (const auto& line : plan.log) logger.info(line);
  }
  if (removed == 0)
    throw InputError(thin_checkpoint_ + " has no zeroed " +
                     (thin_kind_ == "both" ? std::string("filters or channels") : thin_kind_) +
                     " that can be removed; nothing written");
  const auto after = tools::compute_macs(tool_graph(m, m.input), *m.model);
  // The optimizer and schedule state (masks) belong to the dense shapes: a thinned checkpoint
  // starts them afresh when training resumes from it.
  CheckpointParts parts;
  parts.model = m.model.get();
  save_checkpoint(thin_out_, meta, parts);
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
  std::cout << "wrote " << thin_out_ << "\n";
  return kExitOk;
}

int ToolCommands::run_export_onnx() {
  auto m = load_tool_model(onnx_target_.model, onnx_target_.options, onnx_target_.checkpoint,
                           onnx_target_.input);
  const auto graph = tool_graph(m, m.input);
  const auto r = tools::export_onnx(*m.model, graph,
                                    tools::OnnxExportOptions()
                                        .opset(onnx_opset_)
                                        .dynamic_batch(onnx_dynamic_batch_)
                                        .dynamic_hw(onnx_dynamic_hw_),
                                    onnx_out_);
  std::cout << "wrote " << r.path.string() << ": " << m.name << ", opset " << r.opset << ", "
            << r.nodes << " nodes, " << r.initializers << " initializers (from "
            << graph.ops().size() << " ops)\n";
  for (const auto& io : r.inputs) std::cout << "  input  " << tools::onnx_io_string(io) << "\n";
  for (const auto& io : r.outputs) std::cout << "  output " << tools::onnx_io_string(io) << "\n";
  return kExitOk;
}

}  // namespace igb::options
