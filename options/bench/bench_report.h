#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "options/bench/bench_plan.h"

namespace igb::options {

/// What igb-bench knows of one run when it reports: the run, its run directory and its record
/// (bench_run.json: status, error, test summary, latency, checkpoint size).
struct BenchRunRecord {
  const BenchRun* run = nullptr;
  std::filesystem::path dir;
  nlohmann::json record = nlohmann::json::object();
};

/// Prints the comparison table of `runs` (metric columns from their families' layouts, then
/// parameters, sparsity, MACs, checkpoint size, latency and training time) and writes bench.csv,
/// bench.json, bench.md and the plots into `out`. Returns the number of runs that failed.
int write_bench_report(const BenchPlan& plan, const std::vector<const BenchRunRecord*>& runs,
                       const std::filesystem::path& out, int64_t threads);

/// The JSON of file `p`; null when it is missing or not JSON.
nlohmann::json read_json_or_null(const std::filesystem::path& p);

}  // namespace igb::options
