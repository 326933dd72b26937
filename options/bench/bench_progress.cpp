#include "options/bench/bench_progress.h"

#include "core/progress.h"
#include "models/family.h"
#include "models/model.h"

namespace igb::options {

int64_t planned_epochs(const BenchRun& run) {
  if (run.epochs > 0) return run.epochs;
  for (const auto& [key, value] : run.options)
    if (key == "epochs") {
      try {
        return std::stoll(value);
      } catch (const std::exception&) {
        break;  // igb-train refuses it; the run fails at once
      }
    }
  models::register_builtin_models();
  models::TrainConfig defaults;
  models::family(run.optform).make_options()->set_train_defaults(defaults);
  return defaults.epochs;
}

std::string plan_eta(double elapsed_s, int64_t done_at_start, int64_t done_now, int64_t total) {
  const int64_t trained = done_now - done_at_start;
  if (trained <= 0 || total <= done_now) return "";
  return "  ETA " + format_duration(elapsed_s / static_cast<double>(trained) *
                                    static_cast<double>(total - done_now));
}

}  // namespace igb::options
