// What igb-bench's progress line says of the plan: how many epochs each run trains, and when the
// whole plan should be done.
#pragma once

#include <cstdint>
#include <string>

#include "options/bench/bench_plan.h"

namespace igb::options {

/// The epochs `run` trains: its `epochs`, an `epochs` option it passes to igb-train, or its
/// optform's default (what igb-train would use).
int64_t planned_epochs(const BenchRun& run);

/// "  ETA 6m 10s" for the whole plan: the epochs left at the pace of the epochs trained since this
/// bench started (`done_now` − `done_at_start` in `elapsed_s`); empty before one has been.
std::string plan_eta(double elapsed_s, int64_t done_at_start, int64_t done_now, int64_t total);

}  // namespace igb::options
