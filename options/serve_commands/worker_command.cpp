// igb-serve worker: holds a model and runs the stage a master gives it, or one unit of an
// early-exit cascade (docs/serving.md).
#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>

#include "core/cli.h"
#include "core/error.h"
#include "deploy/early_exit/exit_export.h"
#include "deploy/early_exit/exit_network.h"
#include "deploy/serve/serve_worker.h"
#include "models/model.h"
#include "options/common_options.h"
#include "options/inference_runtime.h"
#include "options/serve_commands/serve_command.h"
#include "options/tool_commands/partition_support.h"

namespace igb::options {

namespace {

class WorkerCommand : public ToolCommand {
 public:
  void add_options(CLI::App& sub) override {
    sub.add_option("--listen", options_.listen, "HOST:PORT to serve on (port 0 picks one)")
        ->capture_default_str();
    add_target_options(sub, target_, true);
    sub.add_option("--max-queue", options_.max_queue,
                   "Frames held at most, queued to compute and to send on (0: no limit); a "
                   "sender beyond it waits, up to the plan's timeout")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sub.add_option("--compute-threads", options_.compute_threads,
                   "Threads running stages (1: one frame at a time, in arrival order)")
        ->capture_default_str();
    add_link_options(sub, options_.link, "the next worker");
    add_security_options(sub, security_);
    sub.add_option("--compute-speed", options_.compute_speed,
                   "Emulate a machine this many times as fast as this one (in (0, 1]; a devices "
                   "file's speed relative to this machine)")
        ->capture_default_str();
    add_runtime_option(sub, runtime_, {kInferenceRuntime, kInt8Runtime},
                       "How stages run: inference (the model's inference form) or int8 (the same "
                       "with a quantized model's layers in integers; docs/int8.md)");
    sub.add_option("--cascade", cascade_,
                   "Be a unit of an early-exit cascade: the segments' manifest.json "
                   "(igb-tools early-exit --export)");
    sub.add_option("--unit", unit_.unit, "With --cascade: the segment this unit runs (0-based)");
    sub.add_option("--next", unit_.next, "With --cascade: the next unit's address");
    sub.add_option("--timeout", timeout_s_,
                   "With --cascade: seconds a message to the next unit "
                   "may take")
        ->capture_default_str();
  }

  int run() override {
    apply_security_options(security_);
    configure_runtime(target_.threads, "cpu");
    options_.int8 = runtime_ == kInt8Runtime;
    const auto m = target_.load();
    auto model = m.model;
    model->eval();
    const auto graph = tool_graph(m, m.input);
    deploy::StageWorker worker(
        *model, graph, [model](const torch::Tensor& x) { return model->forward(x); }, options_);
    std::unique_ptr<deploy::ExitNetwork> net;
    if (!cascade_.empty()) {
      const auto manifest = deploy::read_segments_manifest(cascade_);
      net = std::make_unique<deploy::ExitNetwork>(*model, graph, options_.int8);
      const auto& thresholds = manifest.thresholds;
      if (thresholds.size() != net->exits())
        throw InputError("--cascade " + cascade_ + " has " + std::to_string(thresholds.size()) +
                         " segments; " + m.name + " has " + std::to_string(net->exits()));
      unit_.criterion = manifest.criterion;
      if (unit_.unit >= 0 && unit_.unit < static_cast<int>(thresholds.size())) {
        const auto& t = thresholds[static_cast<size_t>(unit_.unit)];
        unit_.score_threshold = t ? deploy::score_threshold(unit_.criterion, *t)
                                  : std::numeric_limits<double>::infinity();
      }
      unit_.timeout_ms = timeout_s_ * 1000.0;
      worker.set_cascade(*net, unit_);
    } else if (!unit_.next.empty()) {
      throw InputError(
          "--next is for cascade units (--cascade); a master gives pipeline stages "
          "their next worker");
    }
    const std::string address = worker.start();
    std::cout << "igb-serve worker: " << m.name << " " << graph::shape_to_string(m.input)
              << (net ? ", cascade unit " + std::to_string(unit_.unit) : std::string())
              << ", listening on " << address << std::endl;
    worker.wait();
    return kExitOk;
  }

 private:
  ToolTarget target_;
  SecurityOptions security_;
  deploy::WorkerOptions options_;
  std::string cascade_, runtime_ = kInferenceRuntime;
  deploy::CascadeUnit unit_;
  double timeout_s_ = 10;
};

}  // namespace

void add_worker_command(Registry<ToolCommandSpec>& r) {
  r.add("worker", {[] { return std::make_unique<WorkerCommand>(); }},
        "Hold a model and run the stage a master gives it, or one unit of an early-exit cascade");
}

}  // namespace igb::options
