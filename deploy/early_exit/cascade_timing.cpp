#include "deploy/early_exit/cascade_timing.h"

#include <chrono>
#include <limits>

namespace igb::deploy {

namespace {

/// Seconds `f` takes over the batches of `set`, the best of `repeats` passes.
double best_seconds(const LabelledBatches& set, int repeats, const std::function<void(size_t)>& f) {
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t b = 0; b < set.inputs.size(); ++b) f(b);
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int64_t LabelledBatches::size() const {
  int64_t n = 0;
  for (const auto& t : targets) n += t.size(0);
  return n;
}

LabelledBatches rebatch(const LabelledBatches& set, int64_t batch) {
  LabelledBatches out;
  out.description = set.description;
  const auto x = at::cat(set.inputs), y = at::cat(set.targets);
  for (int64_t i = 0; i < x.size(0); i += batch) {
    const int64_t n = std::min(batch, x.size(0) - i);
    out.inputs.push_back(x.narrow(0, i, n).contiguous());
    out.targets.push_back(y.narrow(0, i, n).contiguous());
  }
  return out;
}

ExitTable exit_table(const ExitNetwork& net, const LabelledBatches& set, ExitCriterion criterion) {
  ExitTable t;
  t.score.resize(net.exits());
  t.correct.resize(net.exits());
  t.macs = net.exit_macs();
  t.model_macs = net.model_macs();
  for (size_t b = 0; b < set.inputs.size(); ++b) {
    const auto all = net.run_all(set.inputs[b]);
    for (size_t e = 0; e < all.size(); ++e) {
      const auto s = exit_scores(all[e], criterion, set.targets[b]).contiguous();
      const auto c = all[e].argmax(1).eq(set.targets[b]).to(at::kByte).contiguous();
      t.score[e].insert(t.score[e].end(), s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
      t.correct[e].insert(t.correct[e].end(), c.data_ptr<uint8_t>(),
                          c.data_ptr<uint8_t>() + c.numel());
    }
  }
  return t;
}

CascadeTiming time_cascade(const ExitNetwork& net,
                           const std::function<at::Tensor(const at::Tensor&)>& forward,
                           const LabelledBatches& set, ExitCriterion criterion,
                           const std::vector<double>& thresholds,
                           const std::vector<int>& expected_exit, int repeats) {
  CascadeTiming m;
  // The decisions of the cascade against those of every exit computed for every sample.
  size_t k = 0;
  for (size_t b = 0; b < set.inputs.size(); ++b) {
    const auto d = net.run(set.inputs[b], criterion, thresholds, set.targets[b]);
    for (int64_t i = 0; i < d.exit.size(0); ++i, ++k)
      if (d.exit[i].item<int64_t>() != expected_exit.at(k)) ++m.disagreements;
  }
  const double n = static_cast<double>(set.size());
  for (int warm = 0; warm < 2; ++warm) net.run_final_only(set.inputs[0]);
  m.final_ms =
      1e3 / n * best_seconds(set, repeats, [&](size_t b) { net.run_final_only(set.inputs[b]); });
  m.cascade_ms = 1e3 / n * best_seconds(set, repeats, [&](size_t b) {
                   net.run(set.inputs[b], criterion, thresholds, set.targets[b]);
                 });
  m.native_ms = 1e3 / n * best_seconds(set, repeats, [&](size_t b) { forward(set.inputs[b]); });
  return m;
}

}  // namespace igb::deploy
