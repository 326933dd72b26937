#include "options/tool_commands/tool_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <limits>
#include <mutex>

#include "core/cli.h"
#include "core/error.h"

namespace igb::options {

// Each command's file defines its adder.
void add_list_command(Registry<ToolCommandSpec>& r);
void add_report_commands(Registry<ToolCommandSpec>& r);
void add_draw_command(Registry<ToolCommandSpec>& r);
void add_profile_command(Registry<ToolCommandSpec>& r);
void add_thin_command(Registry<ToolCommandSpec>& r);
void add_early_exit_command(Registry<ToolCommandSpec>& r);
void add_make_cifar_command(Registry<ToolCommandSpec>& r);
void add_export_onnx_command(Registry<ToolCommandSpec>& r);
void add_export_torchscript_command(Registry<ToolCommandSpec>& r);
void add_run_command(Registry<ToolCommandSpec>& r);
void add_sensitivity_commands(Registry<ToolCommandSpec>& r);
void add_partition_command(Registry<ToolCommandSpec>& r);

Registry<ToolCommandSpec>& tool_command_registry() {
  static Registry<ToolCommandSpec> registry("command");
  return registry;
}

void register_builtin_tool_commands() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto& r = tool_command_registry();
    add_list_command(r);
    add_report_commands(r);
    add_draw_command(r);
    add_profile_command(r);
    add_thin_command(r);
    add_early_exit_command(r);
    add_make_cifar_command(r);
    add_export_onnx_command(r);
    add_export_torchscript_command(r);
    add_run_command(r);
    add_sensitivity_commands(r);
    add_partition_command(r);
    r.freeze();
  });
}

ToolCommandSet::ToolCommandSet(CLI::App& app)
    : ToolCommandSet(app, (register_builtin_tool_commands(), tool_command_registry())) {}

ToolCommandSet::ToolCommandSet(CLI::App& app, const Registry<ToolCommandSpec>& r) {
  app.require_subcommand(1);
  for (const auto& name : r.names()) {
    CLI::App* sub = app.add_subcommand(name, r.entry(name).help);
    auto command = r.get(name).make();
    command->add_options(*sub);
    commands_.emplace_back(sub, std::move(command));
  }
}

std::vector<std::string> ToolCommandSet::names() const {
  std::vector<std::string> out;
  for (const auto& c : commands_) out.push_back(c.first->get_name());
  return out;
}

void ToolCommandSet::check_command_name(int argc, char** argv) const {
  if (argc < 2 || argv[1][0] == '-') return;
  const auto valid = names();
  if (std::find(valid.begin(), valid.end(), argv[1]) == valid.end())
    throw InputError(std::string("unknown command '") + argv[1] +
                     "'; valid commands: " + join(valid));
}

int ToolCommandSet::run() {
  for (auto& [sub, command] : commands_) {
    if (!sub->parsed()) continue;
    command->check_outputs();
    return command->run();
  }
  return kExitOk;
}

ToolModel ToolTarget::load() const {
  return load_tool_model(model, options, checkpoint, input, seed);
}

void add_seed_option(CLI::App& sub, int64_t& seed) {
  int_range(sub.add_option("--seed", seed,
                           "Seed of a --model's initial weights: every command given the same "
                           "model and seed holds the same weights")
                ->capture_default_str(),
            0, std::numeric_limits<int64_t>::max());
}

void add_threads_option(CLI::App& sub, int64_t& threads) {
  int_range(sub.add_option("--threads", threads, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
}

void add_target_options(CLI::App& sub, ToolTarget& t, bool model_allowed) {
  if (model_allowed) {
    sub.add_option("--model", t.model,
                   "A model of the zoo (igb-tools list models), torchscript:PATH or onnx:PATH, a "
                   "TorchScript or ONNX file (docs/byo-model.md, docs/onnx-import.md)");
    sub.add_option("--model-arg", t.options, "Model option KEY=VALUE (repeatable), e.g. scale=3");
    sub.add_option("--input", t.input, "Input shape NxCxHxW (default: the model's own, batch 1)");
    add_seed_option(sub, t.seed);
  }
  auto* checkpoint = sub.add_option("--checkpoint", t.checkpoint,
                                    "A checkpoint (.ckpt); the model is rebuilt from it");
  if (!model_allowed) checkpoint->required();
  add_threads_option(sub, t.threads);
}

void ReportFiles::check() const {
  if (!csv.empty()) check_output_file("--csv", csv);
  if (!json.empty()) check_output_file("--json", json);
}

void add_report_files(CLI::App& sub, ReportFiles& files) {
  sub.add_option("--csv", files.csv, "Also write the table as CSV to this file");
  sub.add_option("--json", files.json, "Also write the report as JSON to this file");
}

}  // namespace igb::options
