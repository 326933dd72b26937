#pragma once

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
};

/// The layout of family `name`'s evaluations (its metrics and baseline), without building
/// anything: for reports that compare runs of the family (igb-bench). Defined with the family
/// registry (models/families.cpp); InputError listing the families for an unknown name.
const EvalLayout& family_layout(const std::string& name);

}  // namespace igb::models
