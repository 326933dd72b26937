#include "options/drivers.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>
#include <thread>

#include "compress/scheduler.h"
#include "core/checkpoint.h"
#include "core/distributed.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/logger.h"
#include "core/progress.h"
#include "core/subprocess.h"
#include "deploy/onnx/onnx_runtime.h"
#include "models/evaluate_checkpoint.h"
#include "models/family.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/launch.h"
#include "options/tool_commands/sensitivity_commands.h"
#include "options/tool_commands/tool_command.h"
#include "options/yaml_config.h"
#include "tools/macs.h"

namespace igb::options {

namespace fs = std::filesystem;

namespace {

/// Finds `--optform=X` / `--optform X` at the front of argv. Returns the index of the first
/// argument after it, or 0 when there is none.
int take_optform(int argc, char** argv, std::string& optform) {
  if (argc < 2) return 0;
  std::string a = argv[1];
  if (a.rfind("--optform=", 0) == 0) {
    optform = a.substr(10);
    return 2;
  }
  if (a == "--optform") {
    if (argc < 3)
      throw InputError("--optform needs a value; valid optforms: " +
                       join(models::family_registry().names()));
    optform = argv[2];
    return 3;
  }
  return 0;
}

int missing_optform(const std::string& program, int argc, char** argv) {
  std::string list;
  for (const auto& n : models::family_registry().names())
    list += "  " + n + "  " + models::family_registry().entry(n).help + "\n";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << "usage: " << program << " --optform=NAME [options]\n\n"
                << "--optform comes first and selects the application:\n"
                << list << "\n"
                << program << " --optform=NAME --help lists that application's options.\n";
      return kExitOk;
    }
    if (a.rfind("--optform", 0) == 0) throw InputError("--optform must be the first argument");
  }
  throw InputError("the first argument must be --optform=NAME; valid optforms: " +
                   join(models::family_registry().names()));
}

/// A message about option --NAME (a check's "--epochs must be ...", CLI11's "--epochs: ...")
/// prefixed with the config file's line of that option when the value came from the file.
std::string located(const std::string& message, const YamlConfig* yaml, int argc, char** argv,
                    int first) {
  if (!yaml || message.rfind("--", 0) != 0) return message;
  const std::string name = message.substr(2, message.find_first_of(" :=,", 2) - 2);
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--" + name || a.rfind("--" + name + "=", 0) == 0) return message;  // given here
  }
  const std::string where = yaml->where(name);
  return where.empty() ? message : where + ": " + message;
}

/// Parses argv[first..] with `app`; help prints and returns true (caller exits 0).
bool parse(CLI::App& app, int argc, char** argv, int first, YamlConfig* yaml) {
  for (int i = first; i + 1 < argc && yaml; ++i)
    if (std::string(argv[i]) == "--config") yaml->set_file(argv[i + 1]);
  for (int i = first; i < argc && yaml; ++i)
    if (std::string(argv[i]).rfind("--config=", 0) == 0)
      yaml->set_file(std::string(argv[i]).substr(9));
  return parse_command_line(
      app, argc - first + 1, argv + first - 1,
      [&](const std::string& message) { return located(message, yaml, argc, argv, first); });
}

std::string default_run_dir(const std::string& model) {
  return "runs/" + model + "___" + local_time_string("%Y.%m.%d-%H%M%S");
}

}  // namespace

namespace {

/// The run directory: --out, else the resumed checkpoint's folder, else a new one named after the
/// model and the time.
fs::path run_directory(const models::TrainConfig& train) {
  fs::path dir;
  if (!train.out.empty())
    dir = train.out;
  else if (!train.resume.empty())
    dir = fs::path(train.resume).parent_path();
  else
    dir = default_run_dir(train.model);
  return dir.empty() ? fs::path(".") : dir;
}

/// Refuses an --out folder that holds a run: a fresh run there would replace its checkpoints and
/// append a second epoch 0 to its metrics.
void refuse_existing_run(const fs::path& out) {
  for (const char* file : {"checkpoint.ckpt", "best.ckpt", "metrics.csv", "summary.json"})
    if (fs::is_regular_file(out / file))
      throw InputError("--out " + out.string() + " holds a run (" + file +
                       "); continue it with --resume, choose another --out, or give --overwrite "
                       "to replace it");
}

/// The launcher of --nproc N: the same command in N ranks, all writing to the one run directory.
int launch_ranks(int argc, char** argv, const models::TrainConfig& train, const fs::path& out) {
  LocalJob job;
  job.argv.push_back((executable_dir() / "igb-train").string());
  for (int i = 1; i < argc; ++i) job.argv.push_back(argv[i]);
  if (train.out.empty()) job.argv.insert(job.argv.end(), {"--out", out.string()});
  job.nproc = train.nproc;
  job.timeout_seconds = train.dist_timeout;
  return run_local_job(job);
}

/// Adds the MACs of the trained model (after any thinning), from the summary graph of the last
/// checkpoint, to summary.json.
void add_trained_macs(const fs::path& out, nlohmann::json& summary) {
  if (!fs::exists(out / "checkpoint.ckpt") || !fs::exists(out / "summary.json")) return;
  auto m = load_tool_model("", {}, (out / "checkpoint.ckpt").string(), "");
  summary["macs"] = tools::compute_macs(tool_graph(m, m.input), *m.model).total_macs;
  summary["macs_input"] = m.input;
  write_text_atomically(out / "summary.json", summary.dump(2) + "\n");
}

}  // namespace

int train_main(int argc, char** argv) {
  models::register_builtin_models();
  std::string optform;
  int first = take_optform(argc, argv, optform);
  if (!first) return missing_optform("igb-train", argc, argv);
  auto form = models::family(optform).make_options();

  CLI::App app(
      "Train a model of the " + optform + " application, optionally under a compression schedule.",
      "igb-train --optform=" + optform);
  models::TrainConfig train;
  form->set_train_defaults(train);
  add_common_train_options(app, train);
  form->add_train_options(app);
  auto yaml = std::make_shared<YamlConfig>(optform);
  yaml->set_app(&app);
  app.config_formatter(yaml);
  app.set_config(
      "--config", "",
      "Read options from a YAML file (long option names as keys); the command line overrides it");
  app.allow_config_extras(CLI::config_extras_mode::error);
  if (parse(app, argc, argv, first, yaml.get())) return kExitOk;

  // A rank of a data-parallel job (started by --nproc, torchrun, Slurm...) finds it in its
  // environment; the ranks on one machine share its cores.
  const auto dist_env = dist_env_from_environment();
  int64_t threads = train.threads;
  if (dist_env && threads == 0)
    threads = std::max<int64_t>(
        1, static_cast<int64_t>(std::thread::hardware_concurrency()) / dist_env->local_world_size);

  Logger logger;
  RunContext ctx;
  ctx.logger = &logger;
  ctx.device = configure_runtime(threads, train.device);
  ctx.seed = train.seed;
  ctx.terminal = Progress::stderr_is_terminal();
  ctx.out_dir = run_directory(train);
  check_output_folder("--out", ctx.out_dir);
  // Rank 0 alone writes, so it alone looks; it does so before anything is written.
  if (train.resume.empty() && !train.overwrite && (!dist_env || dist_env->rank == 0))
    refuse_existing_run(ctx.out_dir);
  nlohmann::json config_json = {{"optform", optform}};
  for (const auto& [k, v] : resolved_options(app)) config_json[k] = v;
  config_json["out"] = ctx.out_dir.string();
  const models::RunInfo info{optform, yaml->to_config(&app, true, false, ""), config_json};
  if (train.nproc > 1 && !dist_env) {
    // The launcher checks the job once, so that bad input is one line and not one per rank.
    ctx.check_only = true;
    form->run_train(train, app, ctx, info);
    return launch_ranks(argc, argv, train, ctx.out_dir);
  }
  std::unique_ptr<Distributed> dist;
  if (dist_env && dist_env->world_size > 1) {
    dist = std::make_unique<Distributed>(
        *dist_env, std::chrono::milliseconds(static_cast<int64_t>(train.dist_timeout * 1000)));
    ctx.dist = dist.get();
    // Rank 0 speaks for the job; the others print only their errors.
    if (!dist->is_main()) {
      logger.set_quiet(true);
      ctx.terminal = false;
    }
  }

  auto summary = form->run_train(train, app, ctx, info);
  if (dist && !dist->is_main()) return kExitOk;
  add_trained_macs(ctx.out_dir, summary);
  std::cout << summary.dump(2) << std::endl;
  logger.info("run directory: " + ctx.out_dir.string());
  return kExitOk;
}

namespace {

/// The reports of --summary, written beside test_summary.json; the sweep runs on `data`, the data
/// the checkpoint was tested on.
void write_test_summaries(const TestArgs& a, const std::string& data, const fs::path& out_dir,
                          const c10::Device& device, Logger& logger) {
  if (a.summary.empty()) return;
  write_summaries(load_tool_model("", {}, a.request.checkpoint, ""), a.summary, out_dir, logger);
  if (std::find(a.summary.begin(), a.summary.end(), "sensitivity") == a.summary.end()) return;
  SensitivityArgs sweep;  // element pruning at 0, 0.05, ..., 0.95 on 4 evaluation batches
  sweep.checkpoint = a.request.checkpoint;
  sweep.data = data;
  sweep.out = out_dir.string();
  sweep_checkpoint(sweep, device, logger);
}

}  // namespace

int test_main(int argc, char** argv) {
  models::register_builtin_models();
  std::string optform;
  int first = take_optform(argc, argv, optform);
  if (!first) return missing_optform("igb-test", argc, argv);
  const auto& family = models::family(optform);
  auto form = family.make_options();

  CLI::App app("Test a checkpoint of the " + optform +
                   " application: rebuilds the model from the checkpoint alone.",
               "igb-test --optform=" + optform);
  TestArgs a;
  add_common_test_options(app, a);
  form->add_test_options(app, a.request);
  if (parse(app, argc, argv, first, nullptr)) return kExitOk;
  auto& r = a.request;
  fs::path out_dir = r.out.empty() ? fs::path(r.checkpoint).parent_path() : fs::path(r.out);
  if (out_dir.empty()) out_dir = ".";
  check_output_folder("--out", out_dir);
  if (!r.save_images.empty()) check_output_folder("--save-images", r.save_images);
  // A bad post-training YAML or stats file fails before anything is evaluated.
  if (r.quantize_eval.enabled()) {
    const auto ptq = compress::PostTrainOptions::load(r.quantize_eval.schedule);
    r.quantize_eval.weight_bits = int8_weight_bits(
        a.int8_weights, ptq.mode_activations == compress::LinearQuantMode::kAsymmetricUnsigned);
    if (!r.quantize_eval.stats_file.empty()) compress::read_quant_stats(r.quantize_eval.stats_file);
  }

  Logger logger;
  RunContext ctx;
  ctx.logger = &logger;
  ctx.device = configure_runtime(a.threads, a.device);
  // The ONNX model runs in onnxruntime, one process per batch, through files in a scratch folder.
  std::unique_ptr<TempDir> ort_dir;
  std::unique_ptr<deploy::OnnxRuntimeRunner> ort;
  if (!a.onnx.empty()) {
    ort_dir = std::make_unique<TempDir>("igb-onnx-eval");
    ort = std::make_unique<deploy::OnnxRuntimeRunner>(
        a.onnx, ort_dir->path(), deploy::OnnxRuntimeOptions().threads(a.threads));
    r.external.label = "onnxruntime";
    r.external.source = a.onnx;
    r.external.forward = [&ort](const at::Tensor& x) { return ort->run(x); };
  }
  r.inference = [&a, &optform](const models::Model& m, std::string& label) {
    return inference_forward(m, optform, a.runtime, &label, a.int8_engine);
  };
  if (a.int8)
    r.int8 = [&optform, &a](const models::Model& m, const models::Forward& fake_quantized,
                            std::string& what) {
      return int8_forward(m, fake_quantized, optform, &what, a.int8_engine);
    };
  const auto summary = models::evaluate_checkpoint(optform, r, family.make_evaluator, ctx);
  write_test_summaries(a, summary.value("tested_on", std::string("synthetic")), out_dir, ctx.device,
                       logger);
  return kExitOk;
}

int tools_main(int argc, char** argv) {
  models::register_builtin_models();
  compress::register_builtin_compression();
  CLI::App app("Analysis and export tools for igb models and checkpoints.", "igb-tools");
  ToolCommandSet commands(app);
  commands.check_command_name(argc, argv);
  if (parse_command_line(app, argc, argv)) return kExitOk;
  return commands.run();
}

}  // namespace igb::options
