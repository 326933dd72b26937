#include "core/main_guard.h"

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

int guarded_main(const char* program, const std::function<int()>& body) {
  install_interrupt_cleanup();
  try {
    return body();
  } catch (const InputError& e) {
    std::cerr << program << ": error: " << first_line(e.what()) << std::endl;
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
