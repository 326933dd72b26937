#pragma once

#include <functional>

namespace igb {

/// Runs a driver's body, catching every error once: InputError (and usage errors) print one line
/// "<program>: error: <message>" and return 2; anything else prints one line and returns 1.
int guarded_main(const char* program, const std::function<int()>& body);

}  // namespace igb
