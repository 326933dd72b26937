// A plan served on a chain of workers with the simulator beside it: the master, the chain as the
// planner sees it measured on the running workers, re-planning from their reports and planning
// around a lost worker (igb-serve master; docs/serving.md, docs/library.md).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deploy/partition/partition_solver.h"
#include "deploy/partition/pipeline_sim.h"
#include "deploy/partition/stages.h"
#include "deploy/serve/serve_master.h"
#include "deploy/serve/served_chain.h"
#include "graph/summary_graph.h"

namespace igb {
class Logger;
}

namespace igb::deploy {

/// What the simulator gives each device's stage to compute, ms by device: its per-op costs on
/// `chain` for `assignment`, or, with measured serving costs (ServedChain::serving), its compute
/// CPU a frame back to back where that is longer (`stages` of the plan, in chain order).
std::vector<double> simulated_compute_ms(const ServedChain& chain, const graph::SummaryGraph& graph,
                                         const Assignment& assignment,
                                         const std::vector<Stage>& stages);

/// A plan served on MasterOptions::workers, one worker per stage (worker i runs stage i of the
/// first plan, on its device): the ServeMaster, the ServedChain the simulator predicts it with,
/// what measuring the running chain adds to that chain, and re-planning. A lost worker is planned
/// around (failover_planner on the session's chain as it is then) unless `options.replan` is set.
///
///   ServeSession session(graph, chain, plan.assignment(graph), plan.device_names(),
///                        parse_objective(plan.objective), options);
///   session.configure();
///   session.measure_chain(20);                 // hops and hosts for the simulator
///   session.replan(frames, 1, logger);         // serves one frame, re-plans, configures
///   ServeResult measured = session.serve(frames);
///   SimulationResult predicted = session.simulate(30, options.rate_fps);
class ServeSession {
 public:
  /// `graph` must outlive the session. InputError unless the workers serve the plan's stages one
  /// each (check_worker_count).
  ServeSession(const graph::SummaryGraph& graph, ServedChain chain, Assignment assignment,
               std::vector<std::string> device_names, PartitionObjective objective,
               MasterOptions options);
  ~ServeSession();
  ServeSession(const ServeSession&) = delete;
  ServeSession& operator=(const ServeSession&) = delete;

  /// Gives each worker its stage of the current plan, under the next plan number (1 first).
  void configure();
  /// What the simulator takes from the configured chain: which workers share a machine (their
  /// reports) and, with `probes` > 0, each hop's per-message work from that many probes of each
  /// size. Returns the probed hops (empty with no probes).
  std::vector<HopCost> measure_chain(int probes);
  /// What a frame costs each process, from `count` frames (the first of `frames`, over again
  /// where they are fewer) served one at a time and back to back; the chain takes it for the
  /// simulator. The frames count as a stream: configure() again before serving more.
  ServingCosts measure_serving(const std::vector<at::Tensor>& frames, int count);
  /// Serves the first `after` of `frames` (at most all but one; they are taken out of `frames`),
  /// re-plans from the workers' measured op costs and link throughput and configures the plan
  /// the rest is to be served on; `logger` receives what re-planning found.
  Replan replan(std::vector<at::Tensor>& frames, int after, Logger& logger);
  /// Sends `frames` down the chain as configured and collects the results (ServeMaster::serve).
  ServeResult serve(const std::vector<at::Tensor>& frames,
                    const std::function<void(int done, int total)>& progress = {});

  /// The simulator's figures for the current plan: `frames` at `rate_fps` (0: back to back).
  SimulationResult simulate(int frames, double rate_fps) const;
  /// simulated_compute_ms of the current plan.
  std::vector<double> simulated_compute_ms() const;

  const ServedChain& chain() const { return chain_; }
  const Assignment& assignment() const { return assignment_; }
  const std::vector<Stage>& stages() const { return stages_; }
  ServeMaster& master() { return *master_; }

 private:
  const graph::SummaryGraph& graph_;
  ServedChain chain_;
  Assignment assignment_;
  std::vector<std::string> device_names_;
  PartitionObjective objective_;
  std::vector<std::string> workers_;
  double timeout_ms_;
  std::vector<Stage> stages_;
  uint32_t plan_number_ = 0;
  std::unique_ptr<ServeMaster> master_;
};

}  // namespace igb::deploy
