#include "core/main_guard.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/text.h"

namespace igb {

int guarded_main(const char* program, const std::function<int()>& body) {
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
