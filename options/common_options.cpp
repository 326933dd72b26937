#include "options/common_options.h"

#include <CLI/CLI.hpp>
#include <opencv2/core/utility.hpp>

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <thread>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/runtime.h"
#include "models/model.h"

namespace igb::options {

void add_common_train_options(CLI::App& app, models::TrainConfig& c) {
  constexpr double kNoMax = std::numeric_limits<double>::infinity();
  constexpr int64_t kNoIntMax = std::numeric_limits<int64_t>::max();
  app.add_option("--model", c.model, "Model registry name (igb-tools list models)")
      ->capture_default_str();
  app.add_option("--data", c.data, "'synthetic' (built-in generator) or a data folder")
      ->capture_default_str();
  int_range(app.add_option("--epochs", c.epochs,
                           "Total epochs (numbered from 0; a resumed run continues to this)")
                ->capture_default_str(),
            1, 1000000);
  int_range(
      app.add_option("--batch-size", c.batch_size, "Examples per minibatch")->capture_default_str(),
      1, 65536);
  real_range(app.add_option("--lr", c.lr, "Learning rate")->capture_default_str(), 0, kNoMax,
             /*min_excluded=*/true);
  app.add_option("--lr-decay", c.lr_decay,
                 "Learning-rate decay over the epochs (cosine: down to lr/100)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "cosine"}));
  int_range(app.add_option("--lr-warmup", c.lr_warmup,
                           "Epochs of linear learning-rate warm-up: epoch e < N trains at "
                           "lr*(e+1)/N, then --lr-decay's rate (0 = none)")
                ->capture_default_str(),
            0, kNoIntMax);
  app.add_option("--optimizer", c.optimizer, "Optimizer")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  real_range(app.add_option("--momentum", c.momentum, "SGD momentum")->capture_default_str(), 0, 1);
  real_range(
      app.add_option("--weight-decay", c.weight_decay, "L2 weight decay")->capture_default_str(), 0,
      kNoMax);
  int_range(app.add_option("--threads", c.threads, "Intra-op threads (0 = all cores)")
                ->capture_default_str(),
            0, 1024);
  int_range(app.add_option("--workers", c.workers,
                           "Data-loading threads (0 = load on the training thread)")
                ->capture_default_str(),
            0, 64);
  int_range(app.add_option("--seed", c.seed, "Seed of weights, data order and augmentation")
                ->capture_default_str(),
            0, kNoIntMax);
  app.add_option("--device", c.device, "Device")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--out", c.out, "Run directory (default runs/<model>___<YYYY.MM.DD-HHMMSS>)");
  app.add_option("--resume", c.resume,
                 "Checkpoint to continue from (its next epoch; --epochs is the total)");
  app.add_option("--compress", c.compress,
                 "Compression schedule (Distiller YAML); on resume, the checkpoint's by default");
  int_range(app.add_option("--max-batches", c.max_batches,
                           "Cap on minibatches per epoch, for smoke runs (0 = none)")
                ->capture_default_str(),
            0, kNoIntMax);
  app.add_flag("--amp", c.amp,
               "Mixed precision: bfloat16 autocast on CPU, float16 with dynamic loss scaling on "
               "CUDA; weights stay float32")
      ->default_str("false");
  int_range(app.add_option("--nproc", c.nproc,
                           "Data-parallel training in N processes on this machine, each with "
                           "--batch-size examples a step (docs/distributed.md)")
                ->capture_default_str(),
            1, 256);
  real_range(app.add_option("--dist-timeout", c.dist_timeout,
                            "Seconds a rank of a data-parallel job waits for the others before "
                            "it stops with an error")
                 ->capture_default_str(),
             1, 86400);
  int_range(app.add_option("--log-every", c.log_every,
                           "Progress log line every N minibatches when not on a terminal")
                ->capture_default_str(),
            0, kNoIntMax);
}

c10::Device configure_runtime(int64_t threads, const std::string& device) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  torch::set_num_threads(static_cast<int>(threads));
  tune_allocator();
  // Data workers run their own threads; keep OpenCV from oversubscribing the cores.
  cv::setNumThreads(1);
  if (device == "cuda") {
    if (!torch::cuda::is_available())
      throw InputError("--device cuda: no CUDA device is available to this LibTorch build");
    return c10::Device(c10::DeviceType::CUDA, 0);
  }
  if (device != "cpu") throw InputError("--device must be cpu or cuda, not '" + device + "'");
  return c10::Device(c10::DeviceType::CPU);
}

nlohmann::json parse_model_args(const std::vector<std::string>& args) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError("--model-arg '" + a + "' is not KEY=VALUE");
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return out;
}

namespace {

namespace fs = std::filesystem;

// Shortest text of a limit: 1000000, 0.5, 1e-08.
std::string number_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

[[noreturn]] void refuse(const CLI::Option* opt, const std::string& limit,
                         const std::string& value) {
  throw InputError(opt->get_name() + " must be " + limit + ", not " +
                   (value.empty() ? std::string("''") : value));
}

}  // namespace

CLI::Option* int_range(CLI::Option* opt, int64_t min, int64_t max) {
  const bool no_max = max == std::numeric_limits<int64_t>::max();
  const std::string limit =
      no_max ? "an integer >= " + std::to_string(min)
             : "an integer from " + std::to_string(min) + " to " + std::to_string(max);
  const std::string shown = no_max
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  // The Validator outlives this call inside the option; it refers to the option for its name.
  opt->check(CLI::Validator(
      [opt, min, max, limit](std::string& value) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || errno == ERANGE || v < min || v > max)
          refuse(opt, limit, value);
        return "";
      },
      shown));
  return opt;
}

CLI::Option* real_range(CLI::Option* opt, double min, double max, bool min_excluded) {
  const bool no_max = std::isinf(max);
  const std::string limit =
      no_max ? (min_excluded ? "> " : ">= ") + number_text(min)
             : (min_excluded ? "> " + number_text(min) + " and <= " + number_text(max)
                             : "between " + number_text(min) + " and " + number_text(max));
  opt->check(CLI::Validator(
      [opt, min, max, min_excluded, limit](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || !std::isfinite(v) || v < min ||
            (min_excluded && v == min) || v > max)
          refuse(opt, limit, value);
        return "";
      },
      limit));
  return opt;
}

namespace {

// The nearest existing folder at or above `dir` (`dir` itself when it exists); InputError when
// what exists there is not a folder.
fs::path nearest_existing_folder(const std::string& option, const fs::path& path, fs::path dir) {
  for (;;) {
    if (dir.empty()) dir = ".";
    std::error_code ec;
    const auto st = fs::status(dir, ec);
    if (st.type() == fs::file_type::not_found) {
      const fs::path up = dir.parent_path();
      if (up == dir || dir == ".") return dir;
      dir = up;
      continue;
    }
    if (ec)
      throw InputError(option + " " + path.string() + ": " + dir.string() + ": " + ec.message());
    if (!fs::is_directory(st))
      throw InputError(option + " " + path.string() + ": " + dir.string() +
                       " is a file, not a folder");
    return dir;
  }
}

void check_writable(const std::string& option, const fs::path& path, const fs::path& folder) {
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw InputError(option + " " + path.string() + ": the folder " + folder.string() +
                     " is not writable");
}

}  // namespace

void check_output_folder(const std::string& option, const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() != fs::file_type::not_found && ec)
    throw InputError(option + " " + path.string() + ": " + ec.message());
  if (fs::exists(st) && !fs::is_directory(st))
    throw InputError(option + " " + path.string() + " is a file, not a folder");
  check_writable(option, path, nearest_existing_folder(option, path, path));
}

void check_output_file(const std::string& option, const fs::path& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (st.type() != fs::file_type::not_found && ec)
    throw InputError(option + " " + path.string() + ": " + ec.message());
  if (fs::is_directory(st))
    throw InputError(option + " " + path.string() + " is a folder, not a file");
  check_writable(option, path, nearest_existing_folder(option, path, path.parent_path()));
}

void check_model_args_match(const nlohmann::json& model_args, const Checkpoint& checkpoint) {
  if (model_args.empty()) return;
  const auto& stored = checkpoint.meta().model_options;
  nlohmann::json options = stored;
  options.update(model_args);
  // Read through the model's own options, so "8" and 8, or "1e-3" and 0.001, compare equal.
  const auto given = models::create_model(checkpoint.meta().model, options)->options_json();
  for (const auto& [key, value] : model_args.items()) {
    const auto was = stored.contains(key) ? stored[key] : nlohmann::json();
    if (given.contains(key) && given[key] == was) continue;
    throw InputError("--model-arg " + key + "=" + value.get<std::string>() + " differs from " +
                     checkpoint.path().string() + ", whose model has " + key + "=" + was.dump() +
                     "; a resumed run keeps its checkpoint's model");
  }
}

}  // namespace igb::options
