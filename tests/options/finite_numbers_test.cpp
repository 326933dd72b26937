// Every real option of every program refuses a value that is not a finite number, on the command
// line and in a config file, in one line naming the option; found by walking the options CLI11
// holds (their type FLOAT), so an option added later is covered without a table to update.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "compress/scheduler.h"
#include "core/cli.h"
#include "core/error.h"
#include "core/finite_number.h"
#include "models/family.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/serve_commands/serve_command.h"
#include "options/tool_commands/tool_command.h"

namespace igb::options {
namespace {

const std::vector<std::string> kNotFinite = {"nan",  "NaN",   "inf",   "-inf",  ".nan",
                                             ".inf", "-.inf", "1e400", "-1e400"};

/// One program's command line as its driver builds it, with what its options write into.
struct ProgramApp {
  std::string name;
  std::unique_ptr<CLI::App> app;
  std::vector<std::shared_ptr<void>> targets;
  std::unique_ptr<ToolCommandSet> commands;
};

std::vector<ProgramApp> every_program() {
  models::register_builtin_models();
  compress::register_builtin_compression();
  register_builtin_serve_commands();
  std::vector<ProgramApp> out;
  for (const auto& optform : models::family_registry().names()) {
    ProgramApp train{"igb-train --optform=" + optform, std::make_unique<CLI::App>(), {}, {}};
    auto config = std::make_shared<models::TrainConfig>();
    std::shared_ptr<models::FamilyOptions> form = models::family(optform).make_options();
    form->set_train_defaults(*config);
    add_common_train_options(*train.app, *config);
    form->add_train_options(*train.app);
    train.targets = {config, form};
    out.push_back(std::move(train));
    ProgramApp test{"igb-test --optform=" + optform, std::make_unique<CLI::App>(), {}, {}};
    auto args = std::make_shared<TestArgs>();
    std::shared_ptr<models::FamilyOptions> test_form = models::family(optform).make_options();
    add_common_test_options(*test.app, *args);
    test_form->add_test_options(*test.app, args->request);
    test.targets = {args, test_form};
    out.push_back(std::move(test));
  }
  ProgramApp tools{"igb-tools", std::make_unique<CLI::App>(), {}, {}};
  tools.commands = std::make_unique<ToolCommandSet>(*tools.app);
  out.push_back(std::move(tools));
  ProgramApp serve{"igb-serve", std::make_unique<CLI::App>(), {}, {}};
  serve.commands = std::make_unique<ToolCommandSet>(*serve.app, serve_command_registry());
  out.push_back(std::move(serve));
  // igb-bench has no real option (its runs' options are igb-train's, checked there).
  return out;
}

/// Calls `f(path, option)` for every real option of `app` and its sub-commands; `path` is the
/// sub-command names leading to it.
void each_real_option(CLI::App& app, const std::vector<std::string>& path,
                      const std::function<void(const std::vector<std::string>&, CLI::Option*)>& f) {
  for (CLI::Option* opt : app.get_options())
    if (opt->get_type_name().find("FLOAT") != std::string::npos) f(path, opt);
  for (auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    auto p = path;
    p.push_back(sub->get_name());
    each_real_option(*sub, p, f);
  }
}

std::string parse_error(CLI::App& app, std::vector<std::string> args) {
  args.insert(args.begin(), "program");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    parse_command_line(app, static_cast<int>(argv.size()), argv.data());
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(FiniteNumbers, TextThatReadsAsANumberMustBeFinite) {
  for (const auto& t : kNotFinite) EXPECT_FALSE(finite_number_text(t)) << t;
  for (const char* t : {"0", "-2.5", "1e300", "0.001", "1e-400", "abc", "", "1,2"})
    EXPECT_TRUE(finite_number_text(t)) << t;
}

TEST(FiniteNumbers, EveryRealOptionOfEveryProgramRefusesThem) {
  auto programs = every_program();
  int checked = 0;
  for (auto& program : programs) {
    // A first parse adds the checks to every option of the program and its sub-commands.
    parse_error(*program.app, {});
    each_real_option(*program.app, {}, [&](const std::vector<std::string>& path, CLI::Option* opt) {
      const std::string name = opt->get_name();
      for (const auto& value : kNotFinite) {
        std::vector<std::string> args = path;
        args.push_back(name);
        for (int i = 0; i < std::max(1, opt->get_items_expected_min()); ++i) args.push_back(value);
        const std::string what = parse_error(*program.app, args);
        // Refused in one line naming the option: by the finite check ("--lr must be > 0, not
        // nan"), or by a range the option has besides (a negative infinity).
        EXPECT_EQ(what.rfind(name, 0), 0u)
            << program.name << " " << (path.empty() ? "" : path[0] + " ") << name << " " << value
            << ": " << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      }
      ++checked;
    });
  }
  // igb-train's --lr, --momentum, --weight-decay, …; igb-tools' and igb-serve's rates and
  // timeouts: a walk that found none would test nothing.
  EXPECT_GE(checked, 20);
}

}  // namespace
}  // namespace igb::options
