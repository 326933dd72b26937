#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace igb {

class Logger;

/// Progress of one training epoch. On a terminal it redraws one status line (epoch, batch, loss,
/// speed, ETA); otherwise it logs a plain line every `log_every` batches.
class Progress {
 public:
  Progress(Logger& logger, bool terminal, int64_t log_every);

  void begin_epoch(int64_t epoch, int64_t total_epochs, int64_t batches);
  /// Reports batch `batch` (0-based) done, with its loss and the samples it held.
  void batch_done(int64_t batch, double loss, int64_t samples);
  /// Clears the status line (before a log line is printed).
  void clear();
  void end_epoch();

  /// Whether stderr is a terminal (and TERM is not "dumb").
  static bool stderr_is_terminal();

 private:
  Logger& logger_;
  bool terminal_;
  int64_t log_every_;
  int64_t epoch_ = 0, total_epochs_ = 0, batches_ = 0;
  int64_t samples_ = 0;
  double loss_sum_ = 0;
  int64_t loss_count_ = 0;
  bool line_shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

/// "1h02m", "3m05s", "12s".
std::string format_duration(double seconds);

}  // namespace igb
