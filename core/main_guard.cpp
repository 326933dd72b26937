#include "core/main_guard.h"

#include <filesystem>

#include <c10/util/Exception.h>
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/fs.h"
#include "core/text.h"

namespace igb {

namespace {

// Async-signal-safe only: unlink the pending temporaries, then re-raise. SA_RESETHAND has already
// restored the default action, so the re-raised signal (delivered when this returns) ends the
// process with the usual status.
void on_interrupt(int sig) {
  remove_pending_temporaries();
  ::raise(sig);
}

}  // namespace

void install_interrupt_cleanup() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    ::sigaction(sig, &sa, nullptr);
  }
}

std::string filesystem_message(const std::filesystem::filesystem_error& e) {
  // libstdc++ says "filesystem error: cannot create directories: Permission denied [/a/b]".
  std::string what = first_line(e.what());
  const std::string prefix = "filesystem error: ";
  if (what.rfind(prefix, 0) == 0) what = what.substr(prefix.size());
  std::string operation = what.substr(0, what.find(": "));
  if (operation.rfind("cannot ", 0) != 0) operation = "cannot " + operation;
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " to " + e.path2().string();
  return operation + " " + paths + ": " + e.code().message();
}

int guarded_main(const char* program, const std::function<int()>& body) {
  install_interrupt_cleanup();
  // A file-size limit (ulimit -f) then fails the write with EFBIG, which the writer reports in one
  // line ("File too large"), instead of killing the process mid-write.
  ::signal(SIGXFSZ, SIG_IGN);
  try {
    return body();
  } catch (const InputError& e) {
    std::cerr << program << ": error: " << first_line(e.what()) << std::endl;
    return kExitInput;
  } catch (const std::filesystem::filesystem_error& e) {
    // A folder or file that cannot be made or written: the environment's answer to a path the
    // user gave, said in our words ("cannot create directories /a/b: Permission denied").
    std::cerr << program << ": error: " << filesystem_message(e) << std::endl;
    return kExitInput;
  } catch (const c10::Error& e) {
    std::cerr << program << ": error: " << first_line(e.what_without_backtrace()) << std::endl;
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << first_line(e.what()) << std::endl;
    return kExitFailure;
  }
}

}  // namespace igb
