#pragma once

#include <string>

namespace igb {

/// `s` up to its first newline (all of `s` when it has none): the one line an error message
/// keeps of a LibTorch exception text that goes on with a backtrace.
std::string first_line(const std::string& s);

}  // namespace igb
