#include "core/subprocess.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

namespace igb {

namespace fs = std::filesystem;

pid_t start_process(const std::vector<std::string>& argv, const fs::path& log) {
  return start_process(argv, log, {});
}

pid_t start_process(const std::vector<std::string>& argv, const fs::path& log,
                    const std::vector<std::string>& env) {
  if (argv.empty()) throw std::invalid_argument("start_process: no program");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The child's environment: ours, with the names `env` sets replaced. Built before fork, as the
  // child may only make async-signal-safe calls.
  std::vector<std::string> entries = env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto name = entry.substr(0, entry.find('=') + 1);
    bool replaced = false;
    for (const auto& set : env) replaced = replaced || set.rfind(name, 0) == 0;
    if (!replaced) entries.push_back(entry);
  }
  std::vector<char*> envp;
  for (auto& e : entries) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("cannot start a process: ") + strerror(errno));
  if (pid == 0) {
    // The child: only async-signal-safe calls until exec. It dies with its parent (a killed
    // igb-bench takes its igb-train along), also when the parent died before this line.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(128 + SIGTERM);
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) ::dup2(in, 0);
    if (!log_path.empty()) {
      const int out = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out >= 0) {
        ::dup2(out, 1);
        ::dup2(out, 2);
      }
    }
    ::execve(args[0], args.data(), envp.data());
    const char* msg = "cannot run the program: ";
    (void)!::write(2, msg, strlen(msg));
    (void)!::write(2, args[0], strlen(args[0]));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  return pid;
}

namespace {
int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}
}  // namespace

std::optional<int> poll_process(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return -1;
  return exit_code(status);
}

int wait_process(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? -1 : exit_code(status);
}

int64_t free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("cannot open a socket to find a free port");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  int64_t port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  if (port <= 0) throw std::runtime_error("cannot find a free port on 127.0.0.1");
  return port;
}

fs::path executable_dir() {
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : exe.parent_path();
}

}  // namespace igb
