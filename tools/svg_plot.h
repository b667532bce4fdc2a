// Inline SVG charts for the HTML reports: line charts, horizontal bar charts on a log scale with a
// reference line, and stacked bars. Owns the chart geometry, axes, ticks, legends and colours.
// Output is an <svg> element for embedding in HTML5 (no xmlns, no external references, no
// scripts); every text is XML-escaped. Non-finite values are left out (lines) or clamped to the
// axis (bars); an empty chart renders a short "no data" note instead of an <svg>.
#pragma once

#include <string>
#include <vector>

namespace paradiff::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length
  bool dashed = false;
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  bool integer_x = false;  // x ticks at integers only (steps)
};

struct Bar {
  std::string label;
  double value = 0;
};

// Horizontal bars, log-scaled value axis, a vertical reference line (e.g. error / bound = 1).
struct LogBarChart {
  std::string title, value_label;
  std::vector<Bar> bars;
  double reference = 1.0;  // drawn when > 0
  std::string reference_label;
};

// One stacked bar per group (e.g. rank), one segment per category (e.g. memory kind).
struct StackedBarChart {
  std::string title, y_label;
  std::vector<std::string> groups;
  std::vector<std::string> categories;
  std::vector<std::vector<double>> values;  // [group][category]
  bool bytes = false;                       // label the axis in B / KiB / MiB / GiB
};

std::string Render(const LineChart& chart);
std::string Render(const LogBarChart& chart);
std::string Render(const StackedBarChart& chart);

// Escapes &, <, >, " and ' for XML / HTML / SVG text and attributes, and drops the control
// characters XML 1.0 cannot hold (JUnit, SVG and HTML share this one escaper).
std::string Escape(const std::string& text);

// "12.5 KiB" and the like.
std::string HumanBytes(double bytes);

}  // namespace paradiff::svg
