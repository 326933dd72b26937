#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/table.h"

namespace igb::tools {

/// What every report produces: a table for people (printed, or CSV), lines under it (totals),
/// and a JSON document for programs.
struct Report {
  std::string title;
  Table table;
  std::vector<std::string> footer;
  nlohmann::json json;
};

/// Prints the title, table and footer to `out`.
void print_report(const Report& report, std::ostream& out);

/// Writes the table as CSV to `csv` and the JSON to `json` (each skipped when empty), atomically.
void write_report(const Report& report, const std::filesystem::path& csv,
                  const std::filesystem::path& json);

/// Digits grouped by thousands: 1,814,073,344.
std::string grouped(int64_t v);

}  // namespace igb::tools
