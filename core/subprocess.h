#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace igb {

/// Starts `argv[0]` (a path) with the rest of `argv` as its arguments, stdin from /dev/null and
/// stdout and stderr appended to `log` (created when missing). Returns the child's pid; a program
/// that cannot be started still gets a pid, whose exit code is 127 with the reason in `log`. The
/// child gets SIGTERM when the thread that started it ends (PR_SET_PDEATHSIG): children do not
/// outlive their parent, however it dies. Start children from a thread that lives as long as
/// they should.
pid_t start_process(const std::vector<std::string>& argv, const std::filesystem::path& log);

/// As above, with `env` ("NAME=value" entries) replacing or adding to the inherited environment;
/// an empty `log` leaves stdout and stderr those of this process.
pid_t start_process(const std::vector<std::string>& argv, const std::filesystem::path& log,
                    const std::vector<std::string>& env);

/// The exit code of a finished child (128 + signal when a signal ended it), or nothing while it
/// runs. Reaps the child once it has finished; call it again only for running children.
std::optional<int> poll_process(pid_t pid);

/// Waits for the child and returns its exit code as poll_process does.
int wait_process(pid_t pid);

/// A TCP port on 127.0.0.1 that is free now (a local job's MASTER_PORT).
int64_t free_local_port();

/// The folder of the running executable (/proc/self/exe), where the other igb programs are.
std::filesystem::path executable_dir();

}  // namespace igb
