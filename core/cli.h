#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace igb {

/// Rewrites an error message about an option before it is shown (igb-train adds the config file's
/// line of an option that came from there).
using LocateOption = std::function<std::string(const std::string& message)>;

/// Parses a command line with `app` (argv[0] is the program), the one way igb's programs read
/// theirs. `--help` prints the help of the command or sub-command given, `--help-all` (added to
/// `app` and every sub-command) the same with every sub-command's options; either returns true
/// and the caller exits 0. A CLI11 error becomes InputError "MESSAGE (see --help)"; the messages
/// of CLI11 and of InputErrors the options' checks throw pass through `locate` when given.
///
///   CLI::App app("What it does", "igb-bench");
///   app.add_option("--plan", plan)->required();
///   if (parse_command_line(app, argc, argv)) return kExitOk;
bool parse_command_line(CLI::App& app, int argc, char** argv, const LocateOption& locate = {});

/// Limits an integer option to [min, max]. A value outside, or not an integer, is refused with one
/// line that names the option and the limit ("--epochs must be an integer from 1 to 1000000, not
/// 0"); --help shows the range. Returns `opt`.
///
///   int_range(app.add_option("--epochs", epochs), 1, 1000000);
CLI::Option* int_range(CLI::Option* opt, int64_t min, int64_t max);

/// Limits a real option to finite numbers in [min, max] (`min` itself excluded when
/// `min_excluded`; `max` = infinity for none): "--lr must be > 0, not nan". Returns `opt`.
CLI::Option* real_range(CLI::Option* opt, double min, double max, bool min_excluded = false);

/// Parses "KEY=VALUE" model arguments into a JSON object (InputError naming a malformed one).
nlohmann::json parse_model_args(const std::vector<std::string>& args);

/// Refuses (InputError naming `option` and `path`) an output folder that could not be created or
/// written: `path` is a file, one of its parents is a file, or the nearest existing folder is not
/// writable. Creates nothing.
void check_output_folder(const std::string& option, const std::filesystem::path& path);

/// The same for an output file (written atomically, its folders created as needed): `path` is a
/// folder, one of its parents is a file, or the nearest existing folder is not writable.
void check_output_file(const std::string& option, const std::filesystem::path& path);

}  // namespace igb
