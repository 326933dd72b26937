#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace igb::deploy {

/// What every exit says about each sample of a labelled set, computed once (ExitNetwork::run_all
/// and exit_scores): everything calibration and the accuracy-against-MACs curve need. A sample
/// leaves at the first early exit whose score reaches its threshold, else at the final exit.
struct ExitTable {
  /// [exit][sample]: the exit's confidence score (higher = more confident).
  std::vector<std::vector<float>> score;
  /// [exit][sample]: whether the exit's top-1 class is the label.
  std::vector<std::vector<uint8_t>> correct;
  /// MACs per sample of leaving at each exit (ExitNetwork::exit_macs).
  std::vector<int64_t> macs;
  /// MACs of the model without exits: what savings are measured against.
  int64_t model_macs = 0;

  size_t exits() const { return score.size(); }
  size_t samples() const { return score.empty() ? 0 : score[0].size(); }
};

/// The outcome of one set of thresholds on a table.
struct OperatingPoint {
  /// Score thresholds, one per early exit (+infinity: the exit never answers).
  std::vector<double> thresholds;
  /// Top-1 (%) of the decisions.
  double top1 = 0;
  /// Mean MACs per sample, heads included.
  double mean_macs = 0;
  /// Share (%) of the samples leaving at each exit, the final one last.
  std::vector<double> share;
  /// Top-1 (%) of the samples leaving at each exit (0 where none do).
  std::vector<double> exit_top1;
  /// 1 − mean_macs / model_macs, in %.
  double macs_saving = 0;
};

/// The exit each sample of `table` leaves at under `thresholds` (one per early exit).
std::vector<int> exit_of_samples(const ExitTable& table, const std::vector<double>& thresholds);

/// The decisions of `thresholds` on `table`.
OperatingPoint operating_point(const ExitTable& table, const std::vector<double>& thresholds);

/// Top-1 (%) of the final exit alone on every sample.
double final_top1(const ExitTable& table);

/// What calibration aims for.
struct CalibrationTarget {
  enum class Kind {
    /// The least mean MACs whose top-1 is at most `value` points below the final exit's.
    kAccuracyDrop,
    /// The best top-1 whose mean MACs are at most `value` × the model's (0 < value ≤ 1).
    kMacs,
  };
  Kind kind = Kind::kAccuracyDrop;
  double value = 1.0;
};

/// Thresholds for `target` on `table` (the calibration set): each early exit's candidates are
/// the distinct scores of the samples (at most 256 quantiles) and +infinity; one exit is searched
/// exhaustively, several by coordinate descent from "no exit answers" until no single threshold
/// improves (infeasible points rank by how far they miss the target). A target no thresholds
/// meet gives the point closest to it; `met` says whether it was met.
struct Calibration {
  OperatingPoint point;
  bool met = false;
};
Calibration calibrate(const ExitTable& table, const CalibrationTarget& target);

/// The accuracy-against-MACs curve: every early exit at one common threshold, swept over
/// `points` quantiles of the early exits' scores (from "every sample leaves at the first exit"
/// to "none leaves early").
std::vector<OperatingPoint> threshold_sweep(const ExitTable& table, int points = 101);

}  // namespace igb::deploy
