#include "core/finite_number.h"

#include <cctype>
#include <cstdlib>

namespace igb {

bool finite_number_text(const std::string& text) {
  std::string t;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      t += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t.erase(0, 1);
  if (t == ".nan" || t == ".inf") return false;
  char* end = nullptr;
  const long double v = std::strtold(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return true;
  return finite_number(static_cast<double>(v));
}

}  // namespace igb
