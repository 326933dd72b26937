#include "options/common_options.h"

#include <CLI/CLI.hpp>
#include <opencv2/core/utility.hpp>

#include <thread>

#include "core/error.h"
#include "core/runtime.h"

namespace igb::options {

void add_common_train_options(CLI::App& app, models::TrainConfig& c) {
  app.add_option("--model", c.model, "Model registry name (igb-tools list models)")
      ->capture_default_str();
  app.add_option("--data", c.data, "'synthetic' (built-in generator) or a data folder")
      ->capture_default_str();
  app.add_option("--epochs", c.epochs,
                 "Total epochs (numbered from 0; a resumed run continues to this)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  app.add_option("--batch-size", c.batch_size, "Examples per minibatch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  app.add_option("--lr", c.lr, "Learning rate")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--lr-decay", c.lr_decay,
                 "Learning-rate decay over the epochs (cosine: down to lr/100)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "cosine"}));
  app.add_option("--optimizer", c.optimizer, "Optimizer")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--momentum", c.momentum, "SGD momentum")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--weight-decay", c.weight_decay, "L2 weight decay")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--threads", c.threads, "Intra-op threads (0 = all cores)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1024}));
  app.add_option("--workers", c.workers, "Data-loading threads (0 = load on the training thread)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{64}));
  app.add_option("--seed", c.seed, "Seed of weights, data order and augmentation")
      ->capture_default_str();
  app.add_option("--device", c.device, "Device")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--out", c.out, "Run directory (default runs/<model>___<YYYY.MM.DD-HHMMSS>)");
  app.add_option("--resume", c.resume,
                 "Checkpoint to continue from (its next epoch; --epochs is the total)");
  app.add_option("--compress", c.compress,
                 "Compression schedule (Distiller YAML); on resume, the checkpoint's by default");
  app.add_option("--max-batches", c.max_batches,
                 "Cap on minibatches per epoch, for smoke runs (0 = none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--log-every", c.log_every,
                 "Progress log line every N minibatches when not on a terminal")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
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

}  // namespace igb::options
