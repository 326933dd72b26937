#include "core/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/logger.h"

namespace igb {

Progress::Progress(Logger& logger, bool terminal, int64_t log_every)
    : logger_(logger), terminal_(terminal), log_every_(log_every > 0 ? log_every : 0) {}

bool Progress::stderr_is_terminal() {
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0);
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--";
  auto s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(s / 3600),
                  (long long)(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%llds", (long long)s);
  return buf;
}

void Progress::begin_epoch(int64_t epoch, int64_t total_epochs, int64_t batches) {
  epoch_ = epoch;
  total_epochs_ = total_epochs;
  batches_ = batches;
  samples_ = 0;
  loss_sum_ = 0;
  loss_count_ = 0;
  start_ = std::chrono::steady_clock::now();
}

void Progress::batch_done(int64_t batch, double loss, int64_t samples) {
  samples_ += samples;
  loss_sum_ += loss;
  ++loss_count_;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double speed = elapsed > 0 ? samples_ / elapsed : 0;
  double eta = (batch + 1) > 0 ? elapsed / (batch + 1) * (batches_ - batch - 1) : 0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "epoch %lld/%lld  batch %lld/%lld  loss %.5f  %.1f samples/s  eta %s",
                (long long)epoch_, (long long)total_epochs_ - 1, (long long)batch + 1,
                (long long)batches_, loss_sum_ / loss_count_, speed, format_duration(eta).c_str());
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s", buf);
    std::fflush(stderr);
    line_shown_ = true;
  } else if (log_every_ > 0 && ((batch + 1) % log_every_ == 0 || batch + 1 == batches_)) {
    logger_.info(buf);
  }
}

void Progress::clear() {
  if (line_shown_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    line_shown_ = false;
  }
}

void Progress::end_epoch() { clear(); }

}  // namespace igb
