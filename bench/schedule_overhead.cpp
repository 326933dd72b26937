// Training-step time of a model with an active compression schedule vs none, in one run:
// alternating blocks of steps on two identical models, medians compared. A quantization schedule
// (DoReFa, PACT, QAT) prepares its model when loaded, before that side's optimizer is built, so
// this is also the QAT step against the FP32 step. Classifiers train on cross-entropy, other models
// (FSRCNN) on inputs in [0, 1] and the MSE to a fixed random target of their output's shape.
// Prints a table and one JSON line.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>

#include <CLI/CLI.hpp>

#include "compress/scheduler.h"
#include "core/host.h"
#include "models/model.h"
#include "models/trainer.h"

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Step-time overhead of a compression schedule");
  std::string model_name = "resnet20_cifar", schedule = "schedules/classify/resnet20_agp.yaml";
  int64_t batch = 128, steps = 10, blocks = 5, threads = 2;
  app.add_option("--model", model_name)->capture_default_str();
  app.add_option("--schedule", schedule)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--steps", steps, "Steps per block")->capture_default_str();
  app.add_option("--blocks", blocks, "Alternating blocks per side")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  double lr = 0.01;
  app.add_option("--lr", lr, "SGD learning rate (a diverging loss makes the step time meaningless)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(static_cast<int>(threads));
  igb::tune_allocator();
  igb::models::register_builtin_models();

  struct Side {
    igb::models::Model model;
    std::unique_ptr<torch::optim::Optimizer> opt;
    std::unique_ptr<igb::compress::TrainingHooks> hooks;
    std::vector<double> times;
    double hook_seconds = 0, last_loss = 0;
    int64_t hook_steps = 0;
  };
  auto make = [&](bool with_schedule) {
    torch::manual_seed(0);
    Side s;
    s.model = igb::models::create_model(model_name, {});
    if (with_schedule) {
      auto sched = igb::compress::CompressionScheduler::from_file(schedule, *s.model, lr, nullptr);
      auto m = s.model;
      sched->set_tracer(m->input_shape(), [m](const torch::Tensor& x) { return m->forward(x); });
      s.hooks = std::move(sched);
    } else {
      s.hooks = std::make_unique<igb::compress::TrainingHooks>();
    }
    // The same optimizer on both sides; the schedule's own groups (PACT's alpha) join it.
    igb::models::TrainConfig config;
    config.optimizer = "sgd";
    config.lr = lr;
    config.momentum = 0.9;
    config.weight_decay = 0;
    s.opt = igb::models::make_optimizer(config, s.model->parameters(), s.hooks->param_groups());
    s.hooks->on_epoch_begin(0, *s.opt);
    return s;
  };
  Side plain = make(false), pruned = make(true);
  auto shape = plain.model->input_shape();
  shape[0] = batch;
  auto x = torch::randn(shape);
  torch::Tensor target;
  {
    torch::NoGradGuard no_grad;
    const auto out = plain.model->forward(x);
    target = out.dim() == 2 ? torch::randint(0, out.size(1), {batch}, torch::kInt64)
                            : torch::rand_like(out);
    if (out.dim() != 2) x = torch::rand(shape);  // images in [0, 1], as the SR data are
  }
  auto loss_of = [&](const torch::Tensor& out) {
    return out.dim() == 2 ? torch::cross_entropy_loss(out, target) : torch::mse_loss(out, target);
  };
  auto run_block = [&](Side& s) {
    auto t0 = std::chrono::steady_clock::now();
    using clock = std::chrono::steady_clock;
    auto timed = [&](auto&& f) {
      auto h0 = clock::now();
      f();
      s.hook_seconds += std::chrono::duration<double>(clock::now() - h0).count();
    };
    for (int64_t b = 0; b < steps; ++b) {
      igb::compress::MinibatchInfo info{0, b, steps};
      timed([&] { s.hooks->on_minibatch_begin(info, *s.opt); });
      auto loss = loss_of(s.model->forward(x));
      timed([&] { loss = s.hooks->before_backward_pass(info, loss, *s.opt); });
      s.opt->zero_grad();
      loss.backward();
      timed([&] { s.hooks->before_parameter_optimization(info, *s.opt); });
      s.opt->step();
      timed([&] { s.hooks->on_minibatch_end(info, *s.opt); });
      s.last_loss = loss.item<double>();
      ++s.hook_steps;
    }
    s.times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                      steps);
  };
  run_block(plain);  // warm-up
  run_block(pruned);
  plain.times.clear();
  pruned.times.clear();
  pruned.hook_seconds = 0;
  pruned.hook_steps = 0;
  for (int64_t i = 0; i < blocks; ++i) {
    run_block(plain);
    run_block(pruned);
  }
  const double a = median(plain.times), b = median(pruned.times);
  const double hook_ms = pruned.hook_seconds / static_cast<double>(pruned.hook_steps) * 1000;
  std::cout << "schedule        step (ms, median of " << blocks << " blocks)\n"
            << "none            " << a * 1000 << "\n"
            << schedule << "  " << b * 1000 << "\n"
            << "step-time difference: " << (b / a - 1) * 100
            << "% (run-to-run noise here is about 5%)\n"
            << "time inside the schedule's hooks: " << hook_ms
            << " ms per step = " << hook_ms / (a * 1000) * 100 << "% of a plain step\n"
            << "last loss: " << plain.last_loss << " without, " << pruned.last_loss
            << " with the schedule\n"
            << "{\"bench\": \"schedule_overhead\", \"model\": \"" << model_name
            << "\", \"schedule\": \"" << schedule << "\", \"batch\": " << batch
            << ", \"plain_step_ms\": " << a * 1000 << ", \"scheduled_step_ms\": " << b * 1000
            << ", \"hook_ms_per_step\": " << hook_ms
            << ", \"hook_overhead\": " << hook_ms / (a * 1000) << ", \"step_time_ratio\": " << b / a
            << ", \"plain_loss\": " << plain.last_loss
            << ", \"scheduled_loss\": " << pruned.last_loss << "}" << std::endl;
  if (!std::isfinite(plain.last_loss) || !std::isfinite(pruned.last_loss))
    std::cout << "warning: a loss is not finite; lower --lr for a meaningful timing" << std::endl;
  return 0;
}
