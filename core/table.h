#pragma once

#include <string>
#include <vector>

namespace igb {

/// A report table: data first, rendered second (psql-style text on the console, CSV to files).
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;

  /// psql-style text: a header, a rule, one line per row; numbers right-aligned.
  std::string to_text() const;
  /// RFC 4180 CSV with a header line.
  std::string to_csv() const;
};

/// Quotes a CSV field when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);

/// Formats `v` with `precision` digits after the point ("%.*f").
std::string fixed(double v, int precision);

/// Appends rows to a CSV file, writing the header when the file is new or empty. When the file
/// already has a different header (a resumed run with new columns), rows are written under the
/// existing header, with missing columns left empty.
class CsvAppender {
 public:
  CsvAppender(std::string path, std::vector<std::string> columns);
  /// `values` are matched to columns by name; unknown names are ignored.
  void append(const std::vector<std::pair<std::string, std::string>>& values);

 private:
  std::string path_;
  std::vector<std::string> columns_;
};

}  // namespace igb
