#include "core/text.h"

namespace igb {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace igb
