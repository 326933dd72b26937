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

/// One bar of a Gantt chart: a span of time on one row.
struct GanttBar {
  int row = 0;
  double start = 0, end = 0;
  /// Bars of one colour index share a colour (a frame, say); ten colours cycle.
  int colour = 0;
  /// Drawn inside the bar when it is wide enough.
  std::string label;
};

/// Rows of spans over a time axis (devices and links over the frames of a pipeline), drawn by
/// cairo with the row names on the left.
struct GanttChart {
  std::string title, x_label;
  std::vector<std::string> rows;
  std::vector<GanttBar> bars;
  int width = 1200;
  /// 0: 90 pixels plus 28 a row.
  int height = 0;
};

std::string gantt_svg(const GanttChart& chart);
std::string gantt_png(const GanttChart& chart);

}  // namespace igb::tools
