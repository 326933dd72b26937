// Training-step throughput of a zoo model on synthetic tensors: the C++ half of
// bench/train_speed.sh, which runs the same loop in PyTorch's Python API for comparison.
// Prints one JSON line: {"impl", "model", "batch", "threads", "steps", "images_per_s",
// "peak_rss_mb"}.
#include <sys/resource.h>

#include <chrono>
#include <iostream>

#include <CLI/CLI.hpp>

#include "core/host.h"
#include "models/model.h"

int main(int argc, char** argv) {
  CLI::App app("Training-step throughput of a zoo model on synthetic tensors");
  std::string model_name = "resnet20_cifar";
  int64_t batch = 128, steps = 30, warmup = 5, threads = 2;
  app.add_option("--model", model_name)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--warmup", warmup)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  torch::manual_seed(0);
  igb::models::register_builtin_models();
  auto model = igb::models::create_model(model_name, {});
  model->train();
  torch::optim::SGD opt(model->parameters(),
                        torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-4));
  auto shape = model->input_shape();
  shape[0] = batch;
  auto x = torch::randn(shape);
  auto y = torch::randint(0, 10, {batch}, torch::kInt64);

  auto step = [&] {
    opt.zero_grad();
    auto loss = torch::cross_entropy_loss(model->forward(x), y);
    loss.backward();
    opt.step();
    return loss.item<double>();
  };
  for (int64_t i = 0; i < warmup; ++i) step();
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < steps; ++i) step();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::cout << "{\"impl\": \"igb\", \"model\": \"" << model_name << "\", \"batch\": " << batch
            << ", \"threads\": " << threads << ", \"steps\": " << steps
            << ", \"images_per_s\": " << static_cast<double>(batch * steps) / secs
            << ", \"peak_rss_mb\": " << static_cast<double>(ru.ru_maxrss) / 1024.0 << "}"
            << std::endl;
  return 0;
}
