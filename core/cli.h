#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class Option;
}  // namespace CLI

namespace igb {

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
