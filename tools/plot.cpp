#include "tools/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>

namespace igb::tools {

namespace {

cairo_status_t append_to_string(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

/// Tick positions over [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `n` of them.
std::vector<double> nice_ticks(double lo, double hi, int n) {
  const double raw = (hi - lo) / std::max(1, n);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Ten distinguishable colours; after ten series the dash pattern changes.
constexpr double kColours[10][3] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                                    {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29},
                                    {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50}, {0.74, 0.74, 0.13},
                                    {0.09, 0.75, 0.81}};

void text_at(cairo_t* cr, const std::string& s, double x, double y, double align_x,
             double align_y) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - e.width * align_x - e.x_bearing, y - e.height * align_y - e.y_bearing);
  cairo_show_text(cr, s.c_str());
}

/// The plot area on the page and the data ranges it shows.
struct Frame {
  double left = 80, top = 50, pw = 0, ph = 0;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool log_x = false;
  /// On a log axis every x is drawn at its log10.
  double tx(double x) const {
    return !log_x ? x : x > 0 ? std::log10(x) : std::numeric_limits<double>::quiet_NaN();
  }
  double sx(double x) const { return left + (tx(x) - x0) / (x1 - x0) * pw; }
  double sy(double y) const { return top + ph - (y - y0) / (y1 - y0) * ph; }
  bool shown(double x, double y) const { return std::isfinite(tx(x)) && std::isfinite(y); }
};

/// The frame of `p`: the data's ranges, padded, with room for point labels.
Frame frame_of(const LinePlot& p) {
  Frame f;
  const double right = 250, bottom = 60;
  f.pw = p.width - f.left - right;
  f.ph = p.height - f.top - bottom;
  f.log_x = p.log_x;
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : p.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!f.shown(s.x[i], s.y[i])) continue;
      x0 = std::min(x0, f.tx(s.x[i]));
      x1 = std::max(x1, f.tx(s.x[i]));
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 - x0 < 1e-12) x0 -= 0.5, x1 += 0.5;
  if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  // Points (and their labels) keep off the frame.
  if (std::any_of(p.series.begin(), p.series.end(), [](const PlotSeries& s) { return !s.lines; })) {
    const double xpad = (x1 - x0) * 0.08;
    x0 -= xpad;
    x1 += xpad;
  }
  f.x0 = x0, f.x1 = x1, f.y0 = y0, f.y1 = y1;
  return f;
}

/// Tick positions of the x axis, in data units: decades on a log axis (1, 2, 5 of each when it
/// spans less than two), nice steps otherwise.
std::vector<double> x_ticks(const Frame& f) {
  if (!f.log_x) return nice_ticks(f.x0, f.x1, 8);
  std::vector<double> ticks;
  for (double d = std::ceil(f.x0); d <= f.x1; ++d) ticks.push_back(std::pow(10.0, d));
  if (ticks.size() >= 3) return ticks;
  ticks.clear();
  for (double d = std::floor(f.x0); d <= f.x1; ++d)
    for (double m : {1.0, 2.0, 5.0})
      if (const double t = m * std::pow(10.0, d); std::log10(t) >= f.x0 && std::log10(t) <= f.x1)
        ticks.push_back(t);
  return ticks;
}

/// Grid, ticks and tick labels, the frame, the axis labels and the title.
void draw_axes(cairo_t* cr, const LinePlot& p, const Frame& f) {
  cairo_set_font_size(cr, 12);
  cairo_set_line_width(cr, 1);
  for (double t : x_ticks(f)) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, f.sx(t), f.top);
    cairo_line_to(cr, f.sx(t), f.top + f.ph);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, tick_label(t), f.sx(t), f.top + f.ph + 8, 0.5, 0);
  }
  for (double t : nice_ticks(f.y0, f.y1, 6)) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, f.left, f.sy(t));
    cairo_line_to(cr, f.left + f.pw, f.sy(t));
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, tick_label(t), f.left - 8, f.sy(t), 1, 0.5);
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, f.left, f.top, f.pw, f.ph);
  cairo_stroke(cr);
  cairo_set_font_size(cr, 14);
  text_at(cr, p.x_label, f.left + f.pw / 2, p.height - 22, 0.5, 0);
  cairo_save(cr);
  cairo_translate(cr, 22, f.top + f.ph / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, p.y_label, 0, 0, 0.5, 0.5);
  cairo_restore(cr);
  cairo_set_font_size(cr, 16);
  text_at(cr, p.title, f.left + f.pw / 2, 18, 0.5, 0);
}

/// A series' line and points, clipped to the plot area, in the current colour.
void draw_series(cairo_t* cr, const PlotSeries& s, const Frame& f) {
  cairo_save(cr);
  cairo_rectangle(cr, f.left, f.top, f.pw, f.ph);
  cairo_clip(cr);
  bool pen = false;
  for (size_t i = 0; s.lines && i < s.x.size() && i < s.y.size(); ++i) {
    if (!f.shown(s.x[i], s.y[i])) {
      pen = false;
      continue;
    }
    if (pen)
      cairo_line_to(cr, f.sx(s.x[i]), f.sy(s.y[i]));
    else
      cairo_move_to(cr, f.sx(s.x[i]), f.sy(s.y[i]));
    pen = true;
  }
  cairo_stroke(cr);
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
    if (f.shown(s.x[i], s.y[i])) {
      cairo_arc(cr, f.sx(s.x[i]), f.sy(s.y[i]), s.lines ? 2.2 : 5, 0, 2 * M_PI);
      cairo_fill(cr);
    }
  cairo_restore(cr);
}

/// A series' point labels: right of the point (left of it in the plot's right quarter), above
/// it; below it where an earlier label (`placed`) sits close by, or at the top of the plot.
void draw_point_labels(cairo_t* cr, const PlotSeries& s, const Frame& f,
                       std::vector<std::pair<double, double>>& placed) {
  cairo_set_font_size(cr, 11);
  for (size_t i = 0; i < s.labels.size() && i < s.x.size() && i < s.y.size(); ++i) {
    if (!f.shown(s.x[i], s.y[i]) || s.labels[i].empty()) continue;
    const double px = f.sx(s.x[i]), py = f.sy(s.y[i]);
    const bool left_side = px > f.left + 0.75 * f.pw;
    bool below = py - 9 < f.top + 8;
    for (const auto& [lx, ly] : placed)
      if (std::abs(lx - px) < 70 && std::abs(ly - (py - 9)) < 13) below = true;
    const double ly = below ? py + 10 : py - 9;
    placed.emplace_back(px, ly);
    text_at(cr, s.labels[i], px + (left_side ? -9 : 9), ly, left_side ? 1 : 0, 0.5);
  }
}

/// Series `k`'s legend entry: its line or point in its colour, and its name.
void draw_legend_entry(cairo_t* cr, const LinePlot& p, const Frame& f, size_t k) {
  const auto& s = p.series[k];
  const auto* c = kColours[k % 10];
  const double legend_font = p.series.size() > 30 ? 9 : 11;
  const double ly = f.top + 6 + (legend_font + 4) * static_cast<double>(k);
  if (ly > p.height - 10) return;
  cairo_set_source_rgb(cr, c[0], c[1], c[2]);
  const double x = f.left + f.pw;
  if (s.lines) {
    cairo_move_to(cr, x + 14, ly);
    cairo_line_to(cr, x + 38, ly);
    cairo_stroke(cr);
  } else {
    cairo_arc(cr, x + 26, ly, 5, 0, 2 * M_PI);
    cairo_fill(cr);
  }
  cairo_set_dash(cr, nullptr, 0, 0);
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_set_font_size(cr, legend_font);
  text_at(cr, s.name, x + 44, ly, 0, 0.5);
}

void draw(cairo_t* cr, const LinePlot& p) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  const Frame f = frame_of(p);
  draw_axes(cr, p, f);
  std::vector<std::pair<double, double>> placed;  // point labels drawn so far
  for (size_t k = 0; k < p.series.size(); ++k) {
    const auto* c = kColours[k % 10];
    const double dash[] = {6, 3};
    cairo_set_source_rgb(cr, c[0], c[1], c[2]);
    cairo_set_line_width(cr, 1.8);
    cairo_set_dash(cr, dash, (k / 10) % 2 ? 2 : 0, 0);
    draw_series(cr, p.series[k], f);
    draw_point_labels(cr, p.series[k], f, placed);
    draw_legend_entry(cr, p, f, k);
  }
  cairo_set_dash(cr, nullptr, 0, 0);
}

void check(cairo_status_t status, const char* what) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cannot draw the ") + what + ": " +
                             cairo_status_to_string(status));
}

}  // namespace

namespace {

template <class Draw>
std::string render_svg(int width, int height, const Draw& draw_on, const char* what) {
  std::string out;
  cairo_surface_t* surface =
      cairo_svg_surface_create_for_stream(append_to_string, &out, width, height);
  cairo_t* cr = cairo_create(surface);
  draw_on(cr);
  const cairo_status_t status = cairo_status(cr);
  cairo_destroy(cr);
  cairo_surface_finish(surface);
  const cairo_status_t finished = cairo_surface_status(surface);
  cairo_surface_destroy(surface);
  check(status, what);
  check(finished, what);
  return out;
}

template <class Draw>
std::string render_png(int width, int height, const Draw& draw_on, const char* what) {
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  cairo_t* cr = cairo_create(surface);
  draw_on(cr);
  const cairo_status_t status = cairo_status(cr);
  cairo_destroy(cr);
  std::string out;
  const cairo_status_t written = cairo_surface_write_to_png_stream(surface, append_to_string, &out);
  cairo_surface_destroy(surface);
  check(status, what);
  check(written, what);
  return out;
}

int gantt_height(const GanttChart& c) {
  return c.height > 0 ? c.height : 90 + 28 * static_cast<int>(c.rows.size());
}

void draw_gantt(cairo_t* cr, const GanttChart& c) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  const double left = 170, right = 30, top = 40, row_h = 28;
  const double pw = c.width - left - right;
  double t1 = 0;
  for (const auto& b : c.bars) t1 = std::max(t1, b.end);
  if (t1 <= 0) t1 = 1;
  auto sx = [&](double t) { return left + t / t1 * pw; };
  const double bottom = top + row_h * static_cast<double>(c.rows.size());
  cairo_set_font_size(cr, 12);
  cairo_set_line_width(cr, 1);
  for (double t : nice_ticks(0, t1, 10)) {
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, sx(t), top);
    cairo_line_to(cr, sx(t), bottom);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, tick_label(t), sx(t), bottom + 8, 0.5, 0);
  }
  for (size_t r = 0; r < c.rows.size(); ++r)
    text_at(cr, c.rows[r], left - 8, top + row_h * (static_cast<double>(r) + 0.5), 1, 0.5);
  for (const auto& b : c.bars) {
    if (b.row < 0 || b.row >= static_cast<int>(c.rows.size())) continue;
    const auto* col = kColours[((b.colour % 10) + 10) % 10];
    const double x0 = sx(b.start), x1 = std::max(sx(b.end), x0 + 1);
    const double y0 = top + row_h * b.row + 4;
    cairo_set_source_rgb(cr, col[0], col[1], col[2]);
    cairo_rectangle(cr, x0, y0, x1 - x0, row_h - 8);
    cairo_fill(cr);
    if (!b.label.empty()) {
      cairo_text_extents_t e;
      cairo_set_font_size(cr, 10);
      cairo_text_extents(cr, b.label.c_str(), &e);
      if (e.width + 4 < x1 - x0) {
        cairo_set_source_rgb(cr, 1, 1, 1);
        text_at(cr, b.label, (x0 + x1) / 2, y0 + (row_h - 8) / 2, 0.5, 0.5);
      }
      cairo_set_font_size(cr, 12);
    }
  }
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, left, top, pw, bottom - top);
  cairo_stroke(cr);
  text_at(cr, c.x_label, left + pw / 2, bottom + 30, 0.5, 0);
  cairo_set_font_size(cr, 15);
  text_at(cr, c.title, left + pw / 2, top - 14, 0.5, 1);
}

}  // namespace

std::string line_plot_svg(const LinePlot& plot) {
  return render_svg(
      plot.width, plot.height, [&](cairo_t* cr) { draw(cr, plot); }, "SVG plot");
}

std::string line_plot_png(const LinePlot& plot) {
  return render_png(
      plot.width, plot.height, [&](cairo_t* cr) { draw(cr, plot); }, "PNG plot");
}

std::string gantt_svg(const GanttChart& chart) {
  return render_svg(
      chart.width, gantt_height(chart), [&](cairo_t* cr) { draw_gantt(cr, chart); },
      "SVG Gantt chart");
}

std::string gantt_png(const GanttChart& chart) {
  return render_png(
      chart.width, gantt_height(chart), [&](cairo_t* cr) { draw_gantt(cr, chart); },
      "PNG Gantt chart");
}

}  // namespace igb::tools
