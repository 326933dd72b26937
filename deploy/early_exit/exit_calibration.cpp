#include "deploy/early_exit/exit_calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace igb::deploy {

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

void check_table(const ExitTable& t) {
  if (t.exits() < 2 || t.correct.size() != t.exits() || t.macs.size() != t.exits())
    throw InputError("an early-exit table needs at least one early exit and the final one");
  if (t.samples() == 0) throw InputError("an early-exit table needs at least one sample");
  if (t.model_macs <= 0) throw InputError("an early-exit table needs the model's MACs");
}

/// Candidate thresholds of exit `e`: its distinct scores (at most 256 quantiles), then +inf.
std::vector<double> candidates(const ExitTable& t, size_t e) {
  std::vector<float> s = t.score[e];
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::vector<double> out;
  const size_t cap = 256;
  if (s.size() <= cap) {
    out.assign(s.begin(), s.end());
  } else {
    for (size_t i = 0; i < cap; ++i) out.push_back(s[i * (s.size() - 1) / (cap - 1)]);
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  out.push_back(kNever);
  return out;
}

/// (how far the point misses the target, what the target minimises): compared lexically.
std::pair<double, double> rank(const OperatingPoint& p, double base_top1, int64_t model_macs,
                               const CalibrationTarget& target) {
  const double macs_fraction = p.mean_macs / static_cast<double>(model_macs);
  if (target.kind == CalibrationTarget::Kind::kAccuracyDrop) {
    const double miss = std::max(0.0, (base_top1 - target.value) - p.top1);
    return {miss, macs_fraction - 1e-9 * p.top1};
  }
  const double miss = std::max(0.0, macs_fraction - target.value);
  return {miss, -p.top1 + 1e-9 * macs_fraction};
}

}  // namespace

std::vector<int> exit_of_samples(const ExitTable& t, const std::vector<double>& thresholds) {
  check_table(t);
  if (thresholds.size() + 1 != t.exits())
    throw InputError(std::to_string(thresholds.size()) + " thresholds for " +
                     std::to_string(t.exits() - 1) + " early exits");
  std::vector<int> out(t.samples());
  for (size_t i = 0; i < out.size(); ++i) {
    size_t e = 0;
    while (e + 1 < t.exits() && !(static_cast<double>(t.score[e][i]) >= thresholds[e])) ++e;
    out[i] = static_cast<int>(e);
  }
  return out;
}

OperatingPoint operating_point(const ExitTable& t, const std::vector<double>& thresholds) {
  const auto exit_of = exit_of_samples(t, thresholds);
  const size_t n = t.samples(), k = t.exits();
  std::vector<int64_t> taken(k, 0), right(k, 0);
  double macs = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto e = static_cast<size_t>(exit_of[i]);
    ++taken[e];
    right[e] += t.correct[e][i];
    macs += static_cast<double>(t.macs[e]);
  }
  OperatingPoint p;
  p.thresholds = thresholds;
  int64_t all_right = 0;
  for (size_t e = 0; e < k; ++e) {
    all_right += right[e];
    p.share.push_back(100.0 * static_cast<double>(taken[e]) / static_cast<double>(n));
    p.exit_top1.push_back(
        taken[e] ? 100.0 * static_cast<double>(right[e]) / static_cast<double>(taken[e]) : 0.0);
  }
  p.top1 = 100.0 * static_cast<double>(all_right) / static_cast<double>(n);
  p.mean_macs = macs / static_cast<double>(n);
  p.macs_saving = 100.0 * (1.0 - p.mean_macs / static_cast<double>(t.model_macs));
  return p;
}

double final_top1(const ExitTable& t) {
  check_table(t);
  int64_t right = 0;
  for (uint8_t c : t.correct.back()) right += c;
  return 100.0 * static_cast<double>(right) / static_cast<double>(t.samples());
}

Calibration calibrate(const ExitTable& t, const CalibrationTarget& target) {
  check_table(t);
  if (!std::isfinite(target.value) || target.value < 0 ||
      (target.kind == CalibrationTarget::Kind::kMacs && (target.value <= 0 || target.value > 1)))
    throw InputError(target.kind == CalibrationTarget::Kind::kMacs
                         ? "--target-macs is a fraction of the model's MACs, above 0 and at most 1"
                         : "--target-accuracy-drop is in points of top-1, at least 0");
  const double base = final_top1(t);
  const size_t early = t.exits() - 1;
  std::vector<std::vector<double>> cand;
  for (size_t e = 0; e < early; ++e) cand.push_back(candidates(t, e));
  std::vector<double> th(early, kNever);
  OperatingPoint best = operating_point(t, th);
  auto best_rank = rank(best, base, t.model_macs, target);
  // Coordinate descent: each pass tries every candidate of every exit with the others fixed.
  for (int pass = 0; pass < 20; ++pass) {
    bool improved = false;
    for (size_t e = 0; e < early; ++e)
      for (double c : cand[e]) {
        auto trial = th;
        trial[e] = c;
        const auto p = operating_point(t, trial);
        const auto r = rank(p, base, t.model_macs, target);
        if (r < best_rank) {
          best_rank = r;
          best = p;
          th = trial;
          improved = true;
        }
      }
    if (!improved || early == 1) break;
  }
  return {best, best_rank.first == 0};
}

std::vector<OperatingPoint> threshold_sweep(const ExitTable& t, int points) {
  check_table(t);
  std::vector<float> all;
  for (size_t e = 0; e + 1 < t.exits(); ++e)
    all.insert(all.end(), t.score[e].begin(), t.score[e].end());
  std::sort(all.begin(), all.end());
  std::vector<OperatingPoint> out;
  const int n = std::max(2, points);
  double previous = -kNever;
  for (int i = 0; i < n; ++i) {
    const double q = static_cast<double>(
        all[static_cast<size_t>(i) * (all.size() - 1) / static_cast<size_t>(n - 1)]);
    if (q == previous) continue;
    previous = q;
    out.push_back(operating_point(t, std::vector<double>(t.exits() - 1, q)));
  }
  out.push_back(operating_point(t, std::vector<double>(t.exits() - 1, kNever)));
  return out;
}

}  // namespace igb::deploy
