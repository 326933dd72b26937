#include "options/tool_commands.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
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
#include "core/npy.h"
#include "core/table.h"
#include "core/thinning_recipe.h"
#include "data/classify_data.h"
#include "data/datasets.h"
#include "data/synthetic_images.h"
#include "options/common_options.h"
#include "options/optform.h"
#include "tools/draw.h"
#include "tools/export/onnx_export.h"
#include "tools/export/onnx_layer_check.h"
#include "tools/export/onnx_runtime.h"
#include "tools/export/onnx_trt.h"
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

namespace {

/// --calibrate's batches: the synthetic data of the model's optform.
tools::OnnxBatchSource synthetic_batches(const ToolModel& m, int64_t batches) {
  const std::string family = models::model_registry().entry(m.name).factory.family;
  const tools::Shape in = m.input;
  if (family == "classify") {
    data::ClassifyDataOptions o;
    o.dataset = "synthetic";
    o.input_shape = m.model->input_shape();
    o.augment = false;
    o.synthetic_train = 1;
    o.synthetic_val = std::max<int64_t>(1, batches * 32);
    auto d = std::make_shared<data::ClassifyData>(data::load_classify_data("synthetic", o));
    return [d, batches](const std::function<void(const at::Tensor&)>& f) {
      const int64_t size = d->val->size();
      for (int64_t b = 0; b < batches; ++b) {
        std::vector<at::Tensor> xs;
        for (int64_t i = b * 32; i < std::min(size, (b + 1) * 32); ++i)
          xs.push_back(d->val->get(i, 0).input);
        if (!xs.empty()) f(at::stack(xs));
      }
    };
  }
  // Other optforms: the synthetic images their data is made of, one image a batch, as the model's
  // channels (1: luma).
  return [in, batches](const std::function<void(const at::Tensor&)>& f) {
    for (int64_t b = 0; b < batches; ++b) {
      auto rgb = data::render_synthetic_image(in[2], in[3], static_cast<uint64_t>(1000 + b));
      if (in[1] == 1)
        rgb = (0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]).unsqueeze(0);
      else if (in[1] != 3)
        rgb = rgb.mean(0, true).expand({in[1], in[2], in[3]}).contiguous();
      f(rgb.unsqueeze(0));
    }
  };
}

}  // namespace

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

  export_onnx_ = app.add_subcommand("export-onnx",
                                    "Export the model as an ONNX model (FP32, FP16 or INT8 Q/DQ)");
  add_target(export_onnx_, onnx_target_, true);
  export_onnx_->add_option("--out", onnx_out_, "ONNX file to write (.onnx)")->required();
  export_onnx_->add_option("--opset", onnx_opset_, "ONNX opset (only 13)")->capture_default_str();
  export_onnx_->add_flag("--dynamic-batch", onnx_dynamic_batch_,
                         "Declare the batch dim as the symbol N");
  export_onnx_->add_flag("--dynamic-hw", onnx_dynamic_hw_,
                         "Declare the input's height and width as the symbols H and W");
  auto* int8 = export_onnx_->add_flag(
      "--int8-qdq", onnx_int8_,
      "Explicit INT8 for TensorRT: fake quantizations as QuantizeLinear/DequantizeLinear (int8, "
      "zero point 0), quantized Conv/ConvTranspose/Gemm weights FP32 -> Q -> DQ per output "
      "channel; grids that do not fit int8 are reported");
  auto* fp16 = export_onnx_->add_flag(
      "--fp16", onnx_fp16_,
      "Initializers and computation in float16; the input and output stay float32 (a Cast after "
      "the input and before the output)");
  int8->excludes(fp16);
  auto* calibrate =
      export_onnx_
          ->add_option("--calibrate", onnx_calibrate_,
                       "With --int8-qdq on a float model: activation ranges (amax, scale "
                       "amax/127) of every Conv/ConvTranspose/Gemm input and residual skip over "
                       "N batches of the model's optform's synthetic data (classify: 32 images a "
                       "batch; sr: one image); weights amax/127 per output channel")
          ->needs(int8);
  int_range(calibrate, 1, 100000);
  export_onnx_
      ->add_option("--calibration-method", onnx_calibration_method_,
                   "max (largest |x|) or percentile (per-batch percentile of |x|, averaged)")
      ->capture_default_str()
      ->check(CLI::IsMember({"max", "percentile"}))
      ->needs(calibrate);
  export_onnx_
      ->add_option("--percentile", onnx_percentile_,
                   "Percentile of --calibration-method percentile")
      ->capture_default_str()
      ->check(CLI::Range(1e-9, 100.0))
      ->needs(calibrate);
  export_onnx_
      ->add_flag("--check-layers", onnx_check_layers_,
                 "With --int8-qdq: run the written file in onnxruntime on one batch of the "
                 "optform's synthetic data and compare every fake-quantized layer with the "
                 "model's, each fed onnxruntime's values of the layers before it; prints a table, "
                 "writes F.layers.csv and F.layers.json, exit 1 when a layer has under 99.9% of "
                 "its values within one step (needs scripts/install_onnxruntime.sh)")
      ->needs(int8);
  add_run_command(app);
  sensitivity_ = std::make_unique<SensitivityCommands>(app);
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
  if (run_->parsed()) {
    check_output_file("--output", run_args_.output);
    if (!run_args_.random_input.empty()) check_output_file("--input", run_args_.input);
  }
  if (sensitivity_->parsed()) {
    sensitivity_->check_outputs();
    return sensitivity_->run();
  }
  configure_runtime(threads_, "cpu");
  if (list_->parsed()) return run_list();
  if (macs_->parsed()) return run_macs();
  if (sparsity_->parsed()) return run_sparsity();
  if (draw_->parsed()) return run_draw();
  if (thin_->parsed()) return run_thin();
  if (profile_->parsed()) return run_profile();
  if (export_onnx_->parsed()) return run_export_onnx();
  if (run_->parsed()) return run_model();
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
  if (onnx_check_layers_ &&
      std::none_of(graph.ops().begin(), graph.ops().end(), [](const tools::OpNode& op) {
        return op.op_kind == tools::OpKind::kFakeQuantize;
      }))
    throw InputError("--check-layers: " + m.name +
                     " has no fake quantization (train it under a quantization schedule); "
                     "there is no quantized layer to compare");
  std::shared_ptr<const tools::OnnxCalibration> calibration;
  if (onnx_calibrate_ > 0)
    calibration = std::make_shared<tools::OnnxCalibration>(
        tools::calibrate_onnx(*m.model, graph, synthetic_batches(m, onnx_calibrate_),
                              onnx_calibration_method_, onnx_percentile_));
  const auto r = tools::export_onnx(*m.model, graph,
                                    tools::OnnxExportOptions()
                                        .opset(onnx_opset_)
                                        .dynamic_batch(onnx_dynamic_batch_)
                                        .dynamic_hw(onnx_dynamic_hw_)
                                        .precision(onnx_int8_   ? tools::OnnxPrecision::kInt8
                                                   : onnx_fp16_ ? tools::OnnxPrecision::kFp16
                                                                : tools::OnnxPrecision::kFp32)
                                        .calibration(calibration),
                                    onnx_out_);
  std::cout << "wrote " << r.path.string() << ": " << m.name << ", opset " << r.opset << ", "
            << r.nodes << " nodes, " << r.initializers << " initializers (from "
            << graph.ops().size() << " ops)\n";
  for (const auto& io : r.inputs) std::cout << "  input  " << tools::onnx_io_string(io) << "\n";
  for (const auto& io : r.outputs) std::cout << "  output " << tools::onnx_io_string(io) << "\n";
  std::cout << "  precision " << r.precision;
  if (calibration)
    std::cout << " (calibrated: " << onnx_calibration_method_ << " over " << calibration->batches
              << " batches)";
  if (r.precision == "int8")
    std::cout << ", " << r.activation_scales.size() << " activation and " << r.weight_scales.size()
              << " weight Q/DQ pairs";
  std::cout << "\n";
  for (const auto& line : r.lines) std::cout << "  note: " << line << "\n";
  const auto trt = tools::write_trt_files(r, {m.input});
  std::cout << "wrote " << trt.script.string() << " and " << trt.json.string() << "\n";
  return onnx_check_layers_ ? check_onnx_layers(m, graph, r) : kExitOk;
}

int ToolCommands::check_onnx_layers(ToolModel& m, const tools::SummaryGraph& graph,
                                    const tools::OnnxExportReport& r) {
  at::Tensor x;
  synthetic_batches(m, 1)([&](const at::Tensor& batch) { x = batch; });
  // A file with a fixed batch takes the traced one: the first images, or seeded noise when the
  // data has fewer.
  if (!onnx_dynamic_batch_ && x.size(0) != m.input[0]) {
    if (x.size(0) > m.input[0]) {
      x = x.narrow(0, 0, m.input[0]);
    } else {
      torch::manual_seed(0);
      x = torch::rand(m.input);
    }
  }
  TempDir scratch("igb-onnx-check");
  const auto check = tools::check_qdq_layers(*m.model, graph, r, x, scratch.path(),
                                             tools::OnnxRuntimeOptions().threads(threads_));
  Table t;
  t.columns = {"Layer", "Scale", "Elements", "Same value", "Within 1 step", "Max steps"};
  nlohmann::json layers = nlohmann::json::array();
  bool ok = true;
  for (const auto& l : check.layers) {
    ok = ok && l.within_one_step >= 0.999;
    t.rows.push_back({l.layer, fixed(l.scale, 6), std::to_string(l.elements), fixed(l.exact, 5),
                      fixed(l.within_one_step, 5), fixed(l.max_steps, 2)});
    layers.push_back({{"layer", l.layer},
                      {"onnx_value", l.onnx_name},
                      {"scale", l.scale},
                      {"elements", l.elements},
                      {"same_value", l.exact},
                      {"within_one_step", l.within_one_step},
                      {"max_steps", l.max_steps}});
  }
  write_text_atomically(fs::path(r.path).replace_extension(".layers.csv"), t.to_csv());
  const nlohmann::json j = {{"model", m.name},
                            {"onnx", r.path.string()},
                            {"input_shape", x.sizes().vec()},
                            {"layers", layers},
                            {"output_max_abs_diff", check.output_max_abs},
                            {"output_max_abs", check.output_max}};
  write_text_atomically(fs::path(r.path).replace_extension(".layers.json"), j.dump(2) + "\n");
  std::cout << "\nLayer by layer in onnxruntime, input " << tools::shape_to_string(x.sizes().vec())
            << " (each layer fed onnxruntime's values of the layers before it):\n"
            << t.to_text() << "output from onnxruntime's layers: max |ours - onnxruntime| = "
            << check.output_max_abs << " (max |y| = " << check.output_max << ")\n";
  if (!ok) {
    std::cout << "a layer has under 99.9% of its values within one step of onnxruntime's\n";
    return 1;
  }
  return kExitOk;
}

void ToolCommands::add_run_command(CLI::App& app) {
  run_ = app.add_subcommand(
      "run", "Run the model (eval, no grad) on a float32 .npy tensor; write its output as .npy");
  run_->add_option("--model", run_args_.model, "A model of the zoo (see igb-tools list models)");
  run_->add_option("--model-arg", run_args_.options,
                   "Model option KEY=VALUE (repeatable), e.g. scale=3");
  run_->add_option("--checkpoint", run_args_.checkpoint,
                   "A checkpoint (.ckpt); the model is rebuilt from it");
  run_->add_option("--input", run_args_.input,
                   "Input tensor: a float32 .npy file of the model's rank and channel count")
      ->required();
  run_->add_option("--output", run_args_.output, "Output .npy file to write (float32)")->required();
  int_range(run_->add_option("--threads", threads_, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
  run_->add_option("--random-input", run_args_.random_input,
                   "Instead of reading --input, write there uniform [0, 1) values of this shape "
                   "(NxCxHxW) drawn with --seed, then run on them");
  run_->add_option("--seed", run_args_.seed, "Seed of --random-input")->capture_default_str();
  run_->add_option(
      "--compare", run_args_.compare,
      "Compare the output with this .npy (another runtime's output of the same input): "
      "print the largest difference, exit 1 when above --tolerance");
  real_range(run_->add_option("--tolerance", run_args_.tolerance,
                              "Largest |output - compare| allowed, as a fraction of max |output|")
                 ->capture_default_str(),
             0, 1);
  run_->add_option("--device", run_args_.device, "cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
}

int ToolCommands::run_model() {
  const c10::Device device = configure_runtime(threads_, run_args_.device);
  auto m = load_tool_model(run_args_.model, run_args_.options, run_args_.checkpoint, "");
  if (!run_args_.random_input.empty()) {
    const auto s = tools::parse_shape(run_args_.random_input, "--random-input");
    check_input_fits(s, run_args_.random_input);
    torch::manual_seed(static_cast<uint64_t>(run_args_.seed));
    write_npy(run_args_.input, torch::rand(s));
  }
  const at::Tensor x = read_npy(run_args_.input);
  const auto own = m.model->input_shape();
  const tools::Shape shape = x.sizes().vec();
  const std::string where = run_args_.input + ": ";
  if (shape.size() != own.size())
    throw InputError(where + "a " + std::to_string(shape.size()) + "-D tensor (shape " +
                     tools::shape_to_string(shape) + "), but " + m.name + " takes " +
                     std::to_string(own.size()) + "-D input like " + tools::shape_to_string(own));
  if (own.size() >= 2 && shape[1] != own[1])
    throw InputError(where + std::to_string(shape[1]) + " channels (shape " +
                     tools::shape_to_string(shape) + "), but " + m.name + " takes " +
                     std::to_string(own[1]) + "-channel input like " + tools::shape_to_string(own));
  if (x.numel() == 0) throw InputError(where + "an empty tensor " + tools::shape_to_string(shape));
  m.model->eval();
  m.model->to(device);
  at::Tensor y;
  try {
    torch::NoGradGuard no_grad;
    y = m.model->forward(x.to(device));
  } catch (const c10::Error& e) {
    // A spatial size the model cannot take (a classifier's fixed flatten) fails inside LibTorch.
    std::string why = e.what_without_backtrace();
    why = why.substr(0, why.find('\n'));
    throw InputError(where + "shape " + tools::shape_to_string(shape) + " does not fit " + m.name +
                     ": " + why);
  }
  write_npy(run_args_.output, y);
  std::cout << "wrote " << run_args_.output << ": " << m.name << " "
            << tools::shape_to_string(shape) << " -> " << tools::shape_to_string(y.sizes().vec())
            << "\n";
  if (run_args_.compare.empty()) return kExitOk;
  const at::Tensor ref = read_npy(run_args_.compare);
  const at::Tensor out = y.to(torch::kCPU, torch::kFloat);
  if (ref.sizes() != out.sizes())
    throw InputError(run_args_.compare + ": shape " + tools::shape_to_string(ref.sizes().vec()) +
                     ", but the output is " + tools::shape_to_string(out.sizes().vec()));
  const double diff = (out - ref).abs().max().item<double>();
  const double scale = out.abs().max().item<double>();
  const bool ok = diff <= run_args_.tolerance * scale;
  std::cout << "max |output - " << run_args_.compare << "| = " << diff
            << " (max |output| = " << scale << "): " << (ok ? "within " : "above ")
            << run_args_.tolerance << " of max |output|\n";
  return ok ? kExitOk : kExitFailure;
}

}  // namespace igb::options
