// igb-bench's progress line: the ETA is the whole plan's, runs not started yet included, at the
// pace of what this bench trained (it showed one run's ETA as the plan's).
#include "options/bench/bench_progress.h"

#include <gtest/gtest.h>

#include "core/progress.h"

namespace igb::options {
namespace {

TEST(BenchProgress, ARunWithoutEpochsTrainsItsOptformsDefault) {
  BenchRun r;
  r.optform = "sr";
  r.epochs = 0;
  // igb-train's defaults: sr 36 epochs, classify 6, deblur 100.
  EXPECT_EQ(planned_epochs(r), 36);
  r.optform = "classify";
  EXPECT_EQ(planned_epochs(r), 6);
  r.options = {{"lr", "0.1"}, {"epochs", "7"}};
  EXPECT_EQ(planned_epochs(r), 7);
  r.epochs = 3;
  EXPECT_EQ(planned_epochs(r), 3);
}

TEST(BenchProgress, TheEtaCountsEveryRunLeftAtThisBenchsPace) {
  // Four runs of 10 epochs; the first finished in 50 s: three runs (30 epochs) to go, 150 s.
  EXPECT_EQ(plan_eta(50, 0, 10, 40), "  ETA " + format_duration(150));
  // A resumed bench found 15 epochs done; it trained 5 more in 25 s: 20 left, 100 s.
  EXPECT_EQ(plan_eta(25, 15, 20, 40), "  ETA " + format_duration(100));
  // Nothing trained yet by this bench, or nothing left: no ETA.
  EXPECT_EQ(plan_eta(10, 15, 15, 40), "");
  EXPECT_EQ(plan_eta(10, 0, 40, 40), "");
}

}  // namespace
}  // namespace igb::options
