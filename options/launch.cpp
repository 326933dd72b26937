#include "options/launch.h"

#include <signal.h>

#include <chrono>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "core/subprocess.h"

namespace igb::options {

namespace {

std::string describe_exit(int code) {
  if (code > 128) return "was ended by signal " + std::to_string(code - 128);
  return "exited with code " + std::to_string(code);
}

}  // namespace

int run_local_job(const LocalJob& job) {
  const int64_t port = job.port > 0 ? job.port : free_local_port();
  std::vector<pid_t> pids;
  for (int64_t r = 0; r < job.nproc; ++r)
    pids.push_back(start_process(
        job.argv, "",
        {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r),
         "WORLD_SIZE=" + std::to_string(job.nproc), "LOCAL_WORLD_SIZE=" + std::to_string(job.nproc),
         "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port)}));

  std::vector<std::optional<int>> codes(pids.size());
  std::optional<size_t> first_failure;
  std::chrono::steady_clock::time_point failed_at;
  const auto grace = std::chrono::duration<double>(job.timeout_seconds + 10);
  // 0: running; 1: SIGTERM sent to the ranks left; 2: SIGKILL sent (a stopped process ignores
  // SIGTERM until it is continued).
  int stopping = 0;
  for (;;) {
    bool running = false;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (codes[r]) continue;
      codes[r] = poll_process(pids[r]);
      if (!codes[r]) {
        running = true;
        continue;
      }
      if (*codes[r] != 0 && !first_failure) {
        first_failure = r;
        failed_at = std::chrono::steady_clock::now();
      }
    }
    if (!running) break;
    const auto since = std::chrono::steady_clock::now() - failed_at;
    if (first_failure && stopping < 2 &&
        since > grace + std::chrono::seconds(stopping == 0 ? 0 : 5)) {
      for (size_t r = 0; r < pids.size(); ++r)
        if (!codes[r]) ::kill(pids[r], stopping == 0 ? SIGTERM : SIGKILL);
      ++stopping;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!first_failure) return 0;
  const int code = *codes[*first_failure];
  std::cerr << "igb-train: error: rank " << *first_failure << " of " << job.nproc << " "
            << describe_exit(code) << "; the job stopped" << std::endl;
  return code > 128 ? 1 : code;
}

}  // namespace igb::options
