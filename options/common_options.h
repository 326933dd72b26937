#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "models/train_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace igb::options {

/// Adds the options every training driver has, bound to `config` (whose current values are the
/// defaults shown in --help).
void add_common_train_options(CLI::App& app, models::TrainConfig& config);

/// Sets intra-op threads (0 = all cores) and returns the device named by `device` ("cpu" or
/// "cuda"); InputError when CUDA is asked for but not available.
c10::Device configure_runtime(int64_t threads, const std::string& device);

}  // namespace igb::options
