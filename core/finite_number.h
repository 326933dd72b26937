#pragma once

#include <cmath>
#include <string>

namespace igb {

/// The one finite-number check of everything igb reads: command lines and config files
/// (parse_command_line adds it to every real option), YAML files (YamlReader) and the JSON files
/// igb writes back (JsonReader). NaN and infinities are refused where they are read, in one line
/// naming the option or key.
inline bool finite_number(double v) { return std::isfinite(v); }

/// The same for text as a command line or config file gives it: false for what reads as a number
/// that is not finite ("nan", "inf", YAML's ".nan" and ".inf", and "1e400", beyond a double's
/// range), true for finite numbers and for text that is no number at all (left to the parser).
bool finite_number_text(const std::string& text);

}  // namespace igb
