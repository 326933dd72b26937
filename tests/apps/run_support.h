// Runs one of the built executables and captures what it prints.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace igb::test {

/// Exit code and combined stdout and stderr of a finished command.
struct RunResult {
  int code;
  std::string output;
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::string cur;
    for (char c : output) {
      if (c == '\n') {
        out.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    if (!cur.empty()) out.push_back(cur);
    return out;
  }
};

/// Runs `cmd` through the shell (its standard error with its output) and waits for it.
inline RunResult shell(const std::string& cmd) {
  RunResult r{0, {}};
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, "popen failed for: " + cmd};
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

/// Runs `args` (an executable of the build's apps folder and its arguments, as a shell would
/// split them) and waits for it; `prefix` runs it under another command ("prlimit --fsize=512 ").
inline RunResult run_app(const std::string& args, const std::string& prefix = "") {
  return shell(prefix + std::string(IGB_BIN_DIR) + "/" + args);
}

}  // namespace igb::test
