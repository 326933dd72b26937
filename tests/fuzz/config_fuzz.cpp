// Fuzzes the YAML config reader as igb-train uses it: the sr option set parsing `--config FILE`.
// InputError is the expected answer to a bad file, and so is CLI11's ParseError (a value that
// fails an option's check), which igb-train turns into an InputError; anything else is a finding.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.h"
#include "fuzz_support.h"
#include "models/family.h"
#include "models/train_config.h"
#include "options/common_options.h"
#include "options/yaml_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool registered = [] {
    igb::models::register_builtin_models();
    return true;
  }();
  (void)registered;
  const std::string file = igb::fuzz::write_input("config.yaml", data, size).string();
  auto form = igb::models::family("sr").make_options();
  CLI::App app("fuzz", "igb-train --optform=sr");
  igb::models::TrainConfig train;
  form->set_train_defaults(train);
  igb::options::add_common_train_options(app, train);
  form->add_train_options(app);
  auto yaml = std::make_shared<igb::options::YamlConfig>("sr");
  yaml->set_app(&app);
  yaml->set_file(file);
  app.config_formatter(yaml);
  app.set_config("--config", "", "config file");
  app.allow_config_extras(CLI::config_extras_mode::error);
  const char* argv[] = {"igb-train", "--config", file.c_str()};
  try {
    app.parse(3, const_cast<char**>(argv));
  } catch (const igb::InputError&) {
  } catch (const CLI::ParseError&) {
  }
  return 0;
}
