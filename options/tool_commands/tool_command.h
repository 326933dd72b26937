#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/registry.h"
#include "options/tool_commands/tool_model.h"

namespace CLI {
class App;
}

namespace igb::options {

/// One sub-command of `igb-tools` or `igb-serve`: its options, its help and what it runs. Each
/// lives in a file of its own (options/tool_commands/, options/serve_commands/) and is registered
/// by name with its help line in its program's registry:
///
///   class DrawCommand : public ToolCommand { ... };
///   void add_draw_command(Registry<ToolCommandSpec>& r) {
///     r.add("draw", {[] { return std::make_unique<DrawCommand>(); }}, "Draw the graph ...");
///   }
class ToolCommand {
 public:
  virtual ~ToolCommand() = default;
  /// Adds the command's options to `sub`, the sub-command made for it.
  virtual void add_options(CLI::App& sub) = 0;
  /// Refuses bad output places before any work, so that a bad one costs nothing and writes
  /// nothing. Default: none.
  virtual void check_outputs() const {}
  /// Runs the parsed command; returns the exit code.
  virtual int run() = 0;
};

struct ToolCommandSpec {
  std::function<std::unique_ptr<ToolCommand>()> make;
};

/// The igb-tools commands, by name (filled by register_builtin_tool_commands()).
Registry<ToolCommandSpec>& tool_command_registry();

/// Registers every igb-tools command; idempotent.
void register_builtin_tool_commands();

/// Every command of `registry` (igb-tools' by default) as a sub-command of `app`; after
/// app.parse(), run() checks the output places of the command given, then runs it.
///
///   CLI::App app("igb-tools");
///   ToolCommandSet commands(app);
///   if (parse_command_line(app, argc, argv)) return kExitOk;
///   return commands.run();
class ToolCommandSet {
 public:
  explicit ToolCommandSet(CLI::App& app);
  ToolCommandSet(CLI::App& app, const Registry<ToolCommandSpec>& registry);
  /// InputError "unknown command 'X'; valid commands: …" when argv[1] names no command (CLI11
  /// would only say that one is required).
  void check_command_name(int argc, char** argv) const;
  /// The names of the commands, sorted.
  std::vector<std::string> names() const;
  int run();

 private:
  std::vector<std::pair<CLI::App*, std::unique_ptr<ToolCommand>>> commands_;
};

/// The model a command works on: --model (with --model-arg and --input) or --checkpoint, and
/// --threads.
struct ToolTarget {
  std::string model, checkpoint, input;
  std::vector<std::string> options;
  int64_t threads = 0;
  /// The initial weights of a zoo model given by --model (load_tool_model).
  int64_t seed = 0;
  /// load_tool_model of the options given.
  ToolModel load() const;
};

/// Adds --checkpoint and --threads, and with `model_allowed` --model, --model-arg, --input and
/// --seed (else --checkpoint is required).
void add_target_options(CLI::App& sub, ToolTarget& target, bool model_allowed);

/// Adds --seed (a zoo model's initial weights, ToolTarget::seed).
void add_seed_option(CLI::App& sub, int64_t& seed);

/// Adds --threads (intra-op threads, 0 = all cores).
void add_threads_option(CLI::App& sub, int64_t& threads);

/// --csv and --json of a report.
struct ReportFiles {
  std::string csv, json;
  /// Refuses a bad place for either (check_output_file).
  void check() const;
};
void add_report_files(CLI::App& sub, ReportFiles& files);

}  // namespace igb::options
