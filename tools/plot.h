#pragma once

#include <string>
#include <vector>

namespace igb::tools {

/// One line of a line plot, or with `lines` false a set of points (a scatter plot).
struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  /// Joins the points by a line; without it the points are drawn larger.
  bool lines = true;
  /// Text drawn beside each point (empty: none).
  std::vector<std::string> labels;
};

/// A line (or scatter) plot with axes, ticks, labels and a legend on the right, drawn by cairo.
struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
  int width = 960, height = 600;
  /// A logarithmic x axis (decades as ticks); x values must be positive (others are skipped).
  bool log_x = false;
};

/// The plot as an SVG document (cairo's SVG surface: text as glyph outlines, well-formed XML).
std::string line_plot_svg(const LinePlot& plot);
/// The plot as a PNG image (8-bit RGB with alpha).
std::string line_plot_png(const LinePlot& plot);

}  // namespace igb::tools
