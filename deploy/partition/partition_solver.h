#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/partition/partition_problem.h"

namespace igb::deploy {

/// How solve_partition searches.
struct PartitionSolverOptions {
  /// The exact search enumerates the model's cut sets (sets of nodes closed under "reads from");
  /// a graph with more is refused rather than solved approximately. A chain of n nodes has n + 1,
  /// ResNet-50 about 300, an inception block the product of its branch lengths.
  int64_t max_cut_sets = 20000;
};

/// The optimal assignment among those that keep every edge moving forward along the chain, for
/// any number of devices and any DAG: a dynamic programme over (device, cut set), where the cut
/// set holds the nodes on that device or earlier ones (docs/partition.md proves it exact).
/// Latency sums stage and link costs; throughput minimises the slowest server first, then the
/// latency among plans that reach it. With two devices, latency, no memory limits, frames starting
/// on the first device and results going to the second, the plan comes from the min s–t cut
/// (min_cut_plan) instead.
/// Throws InputError when no valid assignment exists (memory limits, devices that cannot run a
/// node) or the graph has too many cut sets.
PartitionPlan solve_partition(const PartitionProblem& problem, PartitionObjective objective,
                              const PartitionSolverOptions& options = {});

/// Two devices, latency objective (DADS): a min s–t cut over the DAG, one auxiliary node per
/// tensor so a tensor read by several nodes on the far device is sent once. Requires two devices,
/// frames starting on the first, results going to the second and no memory limit; throws
/// InputError otherwise. Exact when every tensor has a positive size (the link then carries a
/// message, and pays its latency and per-message work once, under every assignment).
PartitionPlan min_cut_plan(const PartitionProblem& problem);

/// The number of cut sets of the graph (at most `limit`; limit + 1 means "more").
int64_t count_cut_sets(const PartitionProblem& problem, int64_t limit);

/// The baselines every report shows beside the optimum, costed by evaluate(): everything on the
/// first device (where frames start), everything on the last, the best single split of the
/// topological order between those two (Neurosurgeon), and the load-balanced split (contiguous
/// stages whose work is proportional to each device's speed). Invalid ones are kept and say why.
std::vector<PartitionPlan> baseline_plans(const PartitionProblem& problem,
                                          PartitionObjective objective);

}  // namespace igb::deploy
