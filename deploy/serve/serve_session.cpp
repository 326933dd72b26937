#include "deploy/serve/serve_session.h"

#include <algorithm>
#include <cstddef>

#include "core/host.h"
#include "core/logger.h"

namespace igb::deploy {

std::vector<double> simulated_compute_ms(const ServedChain& chain, const graph::SummaryGraph& graph,
                                         const Assignment& assignment,
                                         const std::vector<Stage>& stages) {
  auto device_ms = evaluate(chain.problem(graph, true), assignment).device_ms;
  const auto& measured = chain.serving.back_to_back.compute_cpu_ms;
  for (size_t i = 0; i < stages.size() && i < measured.size(); ++i) {
    auto& d = device_ms.at(static_cast<size_t>(stages[i].device));
    d = std::max(d, measured[i]);
  }
  return device_ms;
}

namespace {

/// The devices the stages run on, in chain order.
std::vector<int> stage_devices(const std::vector<Stage>& stages) {
  std::vector<int> devices;
  for (const auto& st : stages) devices.push_back(st.device);
  return devices;
}

}  // namespace

ServeSession::ServeSession(const graph::SummaryGraph& graph, ServedChain chain,
                           Assignment assignment, std::vector<std::string> device_names,
                           PartitionObjective objective, MasterOptions options)
    : graph_(graph),
      chain_(std::move(chain)),
      assignment_(std::move(assignment)),
      device_names_(std::move(device_names)),
      objective_(objective),
      workers_(options.workers),
      timeout_ms_(options.timeout_ms),
      stages_(split_stages(graph_, assignment_, device_names_)) {
  check_worker_count(workers_.size(), stages_);
  // Worker i ran stage i of the first plan: it is that device whatever the plan is later. The
  // planner reads chain_ when a worker is lost, so a re-planned chain is the one planned around.
  if (!options.replan)
    options.replan = failover_planner(graph_, chain_, stage_devices(stages_), device_names_,
                                      objective_, workers_);
  master_ = std::make_unique<ServeMaster>(graph_, std::move(options));
}

ServeSession::~ServeSession() = default;

void ServeSession::configure() { master_->configure(stages_, ++plan_number_); }

std::vector<HopCost> ServeSession::measure_chain(int probes) {
  const auto devices = stage_devices(stages_);
  std::vector<WorkerInfo> reports;
  for (size_t i = 0; i < stages_.size(); ++i)
    reports.push_back(worker_report(workers_[i], timeout_ms_));
  chain_.set_hosts(reports, devices, host_identity(), usable_cores());
  if (probes < 1) return {};
  auto hops = master_->probe_hops(probes);
  chain_.set_hops(hops, devices);
  return hops;
}

ServingCosts ServeSession::measure_serving(const std::vector<at::Tensor>& frames, int count) {
  std::vector<at::Tensor> some;
  for (int i = 0; i < count; ++i) some.push_back(frames[static_cast<size_t>(i) % frames.size()]);
  auto serving = master_->measure_serving(some);
  chain_.set_serving(serving, stage_devices(stages_), graph_, assignment_);
  return serving;
}

Replan ServeSession::replan(std::vector<at::Tensor>& frames, int after, Logger& logger) {
  // The Python system plans the first frame and the second apart, then keeps the second's plan:
  // every change of plan empties the workers' difference caches.
  const size_t k = std::min<size_t>(static_cast<size_t>(after), frames.size() - 1);
  master_->serve({frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(k)});
  std::vector<WorkerInfo> reports;
  for (size_t i = 0; i < stages_.size(); ++i)
    reports.push_back(worker_report(workers_[i], timeout_ms_, true));
  auto next = replan_chain(graph_, chain_, assignment_, device_names_, reports, objective_);
  logger.info(next.summary());
  if (next.kept_for_empty_device) {
    logger.info("the new plan leaves a device without ops; keeping the first plan");
  } else {
    chain_ = next.chain;
  }
  if (next.changed) {
    assignment_ = next.assignment;
    stages_ = split_stages(graph_, assignment_, device_names_);
    // What the stages of the first plan cost tells little of the new ones'.
    chain_.serving = ServingCosts();
    chain_.serving_wait_ms = 0;
  }
  configure();
  frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(k));
  return next;
}

ServeResult ServeSession::serve(const std::vector<at::Tensor>& frames,
                                const std::function<void(int, int)>& progress) {
  return master_->serve(frames, progress);
}

SimulationResult ServeSession::simulate(int frames, double rate_fps) const {
  return chain_.simulate(graph_, assignment_, frames, rate_fps);
}

std::vector<double> ServeSession::simulated_compute_ms() const {
  return deploy::simulated_compute_ms(chain_, graph_, assignment_, stages_);
}

}  // namespace igb::deploy
