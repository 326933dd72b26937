#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace igb::options {

/// How `igb-train --nproc N` starts a data-parallel job on this machine.
struct LocalJob {
  /// The command of every rank: the program and its arguments.
  std::vector<std::string> argv;
  int64_t nproc = 2;
  /// MASTER_PORT of the job; 0 picks a free port on the loopback interface.
  int64_t port = 0;
  /// --dist-timeout: how long a rank waits for another before it gives up.
  double timeout_seconds = 300;
};

/// Starts `job.nproc` ranks with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR
/// (127.0.0.1) and MASTER_PORT set as torchrun sets them, their output on this process's, and
/// waits. When a rank fails, the others are given the timeout (and 10 s) to stop on their own
/// (their next collective fails at once when a peer is gone), then sent SIGTERM, and SIGKILL
/// 5 s later. Returns 0 when
/// every rank succeeded; otherwise prints one line naming the rank that failed first and
/// returns its exit code (1 for a signal).
int run_local_job(const LocalJob& job);

}  // namespace igb::options
