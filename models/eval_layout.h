#pragma once

#include <cctype>
#include <string>
#include <vector>

namespace igb::models {

/// How a family's results are shown: the metrics of its tables with their titles and digits
/// (the primary one first; metrics not listed, such as the loss, are kept but not tabulated).
struct EvalLayout {
  struct Column {
    std::string key, title;
    int digits = 2;
  };
  std::vector<Column> columns;
  /// The baseline, as a column prefix and a key prefix ("Bicubic", "bicubic_psnr"); empty: none.
  std::string baseline;
  /// How the gain over the baseline is said ("the blurred input"), and a note on how it was
  /// measured ("x3, Y, border 3"), whose parts are separated by `separator` (", ").
  std::string baseline_phrase, note, separator = ", ";
  /// The unit of the primary metric's gain ("dB"); empty for none.
  std::string unit;
  /// The datasets every run and test of the family reports, whatever its --data, each under
  /// its key as a prefix ("photos_psnr") and shown under its title ("Photos"); empty for none.
  struct ReportSet {
    std::string key, title;
  };
  std::vector<ReportSet> report_sets;
};

/// The key of the baseline's metric `key` ("bicubic_psnr": the baseline's name in lower case),
/// or with `key` empty the bare prefix ("bicubic").
inline std::string baseline_key(const EvalLayout& layout, const std::string& key = "") {
  std::string prefix = layout.baseline;
  for (auto& c : prefix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key.empty() ? prefix : prefix + "_" + key;
}

/// The layout of family `name`'s evaluations (its metrics and baseline), without building
/// anything: for reports that compare runs of the family (igb-bench). Defined with the family
/// registry (models/families.cpp); InputError listing the families for an unknown name.
const EvalLayout& family_layout(const std::string& name);

}  // namespace igb::models
