#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/train_config.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace igb {
class Checkpoint;
}

namespace igb::options {

/// Adds the options every training driver has, bound to `config` (whose current values are the
/// defaults shown in --help).
void add_common_train_options(CLI::App& app, models::TrainConfig& config);

/// Sets intra-op threads (0 = all cores) and returns the device named by `device` ("cpu" or
/// "cuda"); InputError when CUDA is asked for but not available.
c10::Device configure_runtime(int64_t threads, const std::string& device);

/// Parses "KEY=VALUE" model arguments into a JSON object (InputError naming a malformed one).
nlohmann::json parse_model_args(const std::vector<std::string>& args);

/// Limits an integer option to [min, max]. A value outside, or not an integer, is refused with one
/// line that names the option and the limit ("--epochs must be an integer from 1 to 1000000, not
/// 0"); --help shows the range. Returns `opt`.
///
///   int_range(app.add_option("--epochs", epochs), 1, 1000000);
CLI::Option* int_range(CLI::Option* opt, int64_t min, int64_t max);

/// Limits a real option to finite numbers in [min, max] (`min` itself excluded when
/// `min_excluded`; `max` = infinity for none): "--lr must be > 0, not nan". Returns `opt`.
CLI::Option* real_range(CLI::Option* opt, double min, double max, bool min_excluded = false);

/// Refuses (InputError naming `option` and `path`) an output folder that could not be created or
/// written: `path` is a file, one of its parents is a file, or the nearest existing folder is not
/// writable. Creates nothing.
void check_output_folder(const std::string& option, const std::filesystem::path& path);

/// The same for an output file (written atomically, its folders created as needed): `path` is a
/// folder, one of its parents is a file, or the nearest existing folder is not writable.
void check_output_file(const std::string& option, const std::filesystem::path& path);

/// Refuses --model-arg values that differ from the model options stored in `checkpoint` (a resumed
/// run keeps the checkpoint's model); values equal to the checkpoint's are accepted.
void check_model_args_match(const nlohmann::json& model_args, const Checkpoint& checkpoint);

}  // namespace igb::options
