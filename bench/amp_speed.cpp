// Training-step time and peak memory of mixed precision (--amp) against float32, in one run:
// two identical models, each stepped by its own Trainer through Trainer::train_minibatch (the
// step igb-train runs: bfloat16 autocast on CPU around the forward pass with conv weights and
// inputs in channels-last memory, the loss and backward in float32), in alternating blocks;
// medians compared. Classifiers train on cross-entropy, other
// models (FSRCNN) on inputs in [0, 1] and the MSE to a fixed random target of their output's
// shape. Peak memory is that of the CPU allocator: every tensor allocation is counted by a
// wrapper installed as LibTorch's CPU allocator (LibTorch 1.13 keeps no CPU statistics), and a
// side's figure is its highest live total during its blocks above the total at the block's start
// (activations kept for backward, gradients, temporaries, the bfloat16 weight copies, oneDNN's
// scratchpads, which LibTorch allocates as tensors).
// Prints a table and one JSON line.
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <mutex>
#include <unordered_map>

#include <CLI/CLI.hpp>

#include "compress/training_hooks.h"
#include "core/host.h"
#include "core/logger.h"
#include "core/run_context.h"
#include "core/torch_compat.h"
#include "models/model.h"
#include "models/trainer.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Counts the bytes of live CPU tensors and their peak; forwards to the allocator it replaces.
// Its pointers are their own context (oneDNN's raw_allocate needs that), so sizes are looked up.
class CountingAllocator final : public igb::compat::AllocatorBase {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base), base_free_(base->raw_deleter()) {
    instance_ = this;
  }
  c10::DataPtr allocate_bytes(size_t n) const override {
    void* data = base_->raw_allocate(n);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[data] = n;
      live_ += static_cast<int64_t>(n);
      peak_ = std::max(peak_, live_);
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  int64_t live() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_;
  }
  int64_t peak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = live_;
  }

 private:
  static void release(void* data) {
    auto* self = instance_;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      auto it = self->sizes_.find(data);
      if (it != self->sizes_.end()) {
        self->live_ -= static_cast<int64_t>(it->second);
        self->sizes_.erase(it);
      }
    }
    self->base_free_(data);
  }
  static inline CountingAllocator* instance_ = nullptr;
  c10::Allocator* base_;
  c10::DeleterFnPtr base_free_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, size_t> sizes_;
  mutable int64_t live_ = 0, peak_ = 0;
};

// The fixed batch as a dataset, so a Trainer can be built around it.
class OneBatch : public igb::data::Dataset {
 public:
  explicit OneBatch(igb::data::Example e) : e_(std::move(e)) {}
  int64_t size() const override { return e_.input.size(0); }
  igb::data::Example get(int64_t index, int64_t) const override {
    return {e_.input[index], e_.target[index]};
  }

 private:
  igb::data::Example e_;
};

class BenchTask : public igb::models::TrainingTask {
 public:
  BenchTask(igb::models::Model model, const igb::data::Dataset& data)
      : model_(std::move(model)), data_(data) {}
  igb::models::Model model() override { return model_; }
  const igb::data::Dataset& train_set() const override { return data_; }
  at::Tensor loss(const at::Tensor& output, const at::Tensor& target) override {
    return output.dim() == 2 ? torch::cross_entropy_loss(output, target)
                             : torch::mse_loss(output, target);
  }
  igb::models::Metrics validate() override { return {}; }
  std::string primary_metric() const override { return "loss"; }
  std::string describe(const igb::models::Metrics&) const override { return ""; }
  nlohmann::json summary(const igb::models::Metrics&, const igb::models::Metrics&) const override {
    return nlohmann::json::object();
  }

 private:
  igb::models::Model model_;
  const igb::data::Dataset& data_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Training-step time and peak memory of mixed precision against float32");
  std::string model_name = "resnet20_cifar";
  int64_t batch = 128, steps = 5, blocks = 5, threads = 2;
  double lr = 0.01;
  app.add_option("--model", model_name)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--steps", steps, "Steps per block")->capture_default_str();
  app.add_option("--blocks", blocks, "Alternating blocks per side")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--lr", lr, "SGD learning rate (a diverging loss makes the step time meaningless)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();
  static CountingAllocator counting(c10::GetCPUAllocator());
  c10::SetCPUAllocator(&counting, /*priority=*/100);

  igb::Logger logger;
  igb::RunContext ctx;
  ctx.logger = &logger;
  igb::compress::TrainingHooks no_schedule;

  struct Side {
    igb::models::Model model;
    std::unique_ptr<BenchTask> task;
    std::unique_ptr<igb::models::Trainer> trainer;
    std::vector<double> times;
    int64_t peak_bytes = 0;
    double last_loss = 0;
  };
  torch::manual_seed(0);
  auto probe = igb::models::create_model(model_name, {});
  auto shape = probe->input_shape();
  shape[0] = batch;
  igb::data::Example example;
  {
    torch::NoGradGuard no_grad;
    const bool classifier = probe->forward(torch::randn(shape)).dim() == 2;
    example.input = classifier ? torch::randn(shape) : torch::rand(shape);  // SR data in [0, 1]
    const auto out = probe->forward(example.input);
    example.target =
        classifier ? torch::randint(0, out.size(1), {batch}, torch::kInt64) : torch::rand_like(out);
  }
  OneBatch data(example);
  auto make = [&](bool amp) {
    torch::manual_seed(0);
    auto s = std::make_unique<Side>();
    s->model = igb::models::create_model(model_name, {});
    s->task = std::make_unique<BenchTask>(s->model, data);
    igb::models::TrainConfig config;
    config.model = model_name;
    config.optimizer = "sgd";
    config.lr = lr;
    config.momentum = 0.9;
    config.batch_size = batch;
    config.amp = amp;
    s->trainer = std::make_unique<igb::models::Trainer>(config, ctx, *s->task, no_schedule,
                                                        igb::models::RunInfo{});
    s->model->train();
    return s;
  };
  auto fp32 = make(false), amp = make(true);

  auto run_block = [&](Side& s) {
    const int64_t base = counting.live();
    counting.reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < steps; ++b) {
      try {
        s.last_loss = s.trainer->train_minibatch({0, b, steps}, example);
      } catch (const std::runtime_error&) {  // "training diverged": the loss is not finite
        s.last_loss = std::nan("");
      }
    }
    s.times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                      steps);
    s.peak_bytes = std::max(s.peak_bytes, counting.peak() - base);
  };
  run_block(*fp32);  // warm-up: oneDNN builds its kernels on first use
  run_block(*amp);
  fp32->times.clear();
  amp->times.clear();
  for (int64_t i = 0; i < blocks; ++i) {
    run_block(*fp32);
    run_block(*amp);
  }
  const double a = median(fp32->times), b = median(amp->times);
  const double mib = 1024.0 * 1024.0;
  const double ma = fp32->peak_bytes / mib, mb = amp->peak_bytes / mib;
  std::cout << model_name << ", batch " << batch << ", " << threads << " threads\n"
            << "side     step (ms, median of " << blocks << " blocks)   peak tensor memory (MiB)\n"
            << "fp32     " << a * 1000 << "   " << ma << "\n"
            << "amp      " << b * 1000 << "   " << mb << "\n"
            << "amp/fp32 step time " << b / a << ", memory " << mb / ma << "\n"
            << "last loss: " << fp32->last_loss << " fp32, " << amp->last_loss << " amp\n"
            << "{\"bench\": \"amp_speed\", \"model\": \"" << model_name
            << "\", \"batch\": " << batch << ", \"threads\": " << threads
            << ", \"fp32_step_ms\": " << a * 1000 << ", \"amp_step_ms\": " << b * 1000
            << ", \"step_time_ratio\": " << b / a << ", \"fp32_peak_mib\": " << ma
            << ", \"amp_peak_mib\": " << mb << ", \"fp32_loss\": " << fp32->last_loss
            << ", \"amp_loss\": " << amp->last_loss << "}" << std::endl;
  if (!std::isfinite(fp32->last_loss) || !std::isfinite(amp->last_loss))
    std::cout << "warning: a loss is not finite; lower --lr for a meaningful timing" << std::endl;
  return 0;
}
