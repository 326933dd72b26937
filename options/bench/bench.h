#pragma once

namespace igb::options {

/// The whole of `igb-bench --plan P --out DIR [--jobs N] [--resume] [--threads T]`: trains and
/// tests every run of the plan (options/bench/bench_plan.h) as separate igb-train and igb-test
/// processes, measures each final model with igb-tools, and compares them
/// (options/bench/bench_report.h).
int bench_main(int argc, char** argv);

}  // namespace igb::options
