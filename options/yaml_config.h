#pragma once

#include <CLI/App.hpp>
#include <CLI/ConfigFwd.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace igb::options {

/// CLI11 configuration files in YAML: `--config FILE.yaml` holds `option-name: value` pairs (the
/// long option names without dashes; lists for repeated options). Command-line values override the
/// file; unknown keys are errors naming the file and line. `to_config` writes the resolved options
/// in the same form, so a run's config.yaml can be passed back with --config.
class YamlConfig : public CLI::Config {
 public:
  /// `optform` is checked against an `optform:` key in the file, if there is one.
  explicit YamlConfig(std::string optform) : optform_(std::move(optform)) {}

  std::string to_config(const CLI::App* app, bool default_also, bool write_description,
                        std::string prefix) const override;
  std::vector<CLI::ConfigItem> from_config(std::istream& input) const override;

  /// Name used in messages about the file being read.
  void set_file(std::string file) { file_ = std::move(file); }
  /// The app whose option names the file's keys must be (checked with file:line messages).
  void set_app(const CLI::App* app) { app_ = app; }
  /// "file:line" of option `option` (its long name) in the file read; "" when it is not there.
  std::string where(const std::string& option) const;

 private:
  std::string optform_;
  std::string file_ = "config";
  const CLI::App* app_ = nullptr;
  /// Where each option read from the file stands (from_config is const to CLI11).
  mutable std::map<std::string, std::string> lines_;
};

/// The resolved value of every option of `app` (long name → value; lists for repeated options),
/// the command-line value where given, else the config file's, else the default.
std::vector<std::pair<std::string, nlohmann::json>> resolved_options(const CLI::App& app);

}  // namespace igb::options
