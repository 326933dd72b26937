#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cli.h"
#include "models/evaluate_checkpoint.h"
#include "models/train_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace igb::options {

/// Adds the options every training driver has, bound to `config` (whose current values are the
/// defaults shown in --help).
void add_common_train_options(CLI::App& app, models::TrainConfig& config);

/// igb-test's own options; the family adds its data options to `request`.
struct TestArgs {
  models::TestRequest request;
  std::string device = "cpu", onnx, runtime = "inference", int8_engine = "auto", int8_weights = "8";
  bool int8 = false;
  int64_t threads = 0;
  std::vector<std::string> summary;
};

/// Adds igb-test's own options, bound to `args` (the family then adds its data options to
/// args.request).
void add_common_test_options(CLI::App& app, TestArgs& args);

/// Sets intra-op threads (0 = all cores) and returns the device named by `device` ("cpu",
/// "cuda" or "cuda:N"); InputError in one line naming it when it is none of those, when this
/// LibTorch has no CUDA or no GPU, or when the machine has no GPU N.
c10::Device configure_runtime(int64_t threads, const std::string& device);

}  // namespace igb::options
