#include "core/table.h"

#include "core/fs.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace igb {

namespace {
bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}
}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string fixed(double v, int precision) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string Table::to_text() const {
  std::vector<size_t> width(columns.size());
  for (size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  std::ostringstream os;
  auto pad = [&](const std::string& s, size_t w, bool right) {
    std::string fill(w - std::min(w, s.size()), ' ');
    return right ? fill + s : s + fill;
  };
  for (size_t c = 0; c < columns.size(); ++c)
    os << (c ? " | " : " ") << pad(columns[c], width[c], false);
  os << "\n";
  for (size_t c = 0; c < columns.size(); ++c) os << (c ? "-+-" : "-") << std::string(width[c], '-');
  os << "-\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < columns.size(); ++c) {
      std::string v = c < r.size() ? r[c] : "";
      os << (c ? " | " : " ") << pad(v, width[c], looks_numeric(v));
    }
    os << "\n";
  }
  return os.str();
}

std::string Table::to_csv() const {
  std::ostringstream os;
  for (size_t c = 0; c < columns.size(); ++c) os << (c ? "," : "") << csv_field(columns[c]);
  os << "\n";
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) os << (c ? "," : "") << csv_field(r[c]);
    os << "\n";
  }
  return os.str();
}

CsvAppender::CsvAppender(std::string path, std::vector<std::string> columns)
    : path_(std::move(path)), columns_(std::move(columns)) {
  std::ifstream in(path_);
  std::string header;
  if (in && std::getline(in, header) && !header.empty()) {
    columns_ = split_csv_line(header);
    return;
  }
  std::string line;
  for (size_t c = 0; c < columns_.size(); ++c) line += (c ? "," : "") + csv_field(columns_[c]);
  write_text_atomically(path_, line + "\n");
}

void CsvAppender::append(const std::vector<std::pair<std::string, std::string>>& values) {
  std::string line;
  for (size_t c = 0; c < columns_.size(); ++c) {
    std::string v;
    for (const auto& kv : values)
      if (kv.first == columns_[c]) v = kv.second;
    line += (c ? "," : "") + csv_field(v);
  }
  append_file_bytes(path_, line + "\n");
}

}  // namespace igb
