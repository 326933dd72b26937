#include "tools/report.h"

#include <ostream>

#include "core/fs.h"

namespace igb::tools {

void print_report(const Report& report, std::ostream& out) {
  if (!report.title.empty()) out << report.title << "\n\n";
  out << report.table.to_text();
  for (const auto& line : report.footer) out << line << "\n";
}

void write_report(const Report& report, const std::filesystem::path& csv,
                  const std::filesystem::path& json) {
  if (!csv.empty()) write_text_atomically(csv, report.table.to_csv());
  if (!json.empty()) write_text_atomically(json, report.json.dump(2) + "\n");
}

std::string grouped(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

}  // namespace igb::tools
