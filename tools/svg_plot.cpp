#include "tools/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace paradiff::svg {

namespace {

// Geometry of every chart, in SVG user units (pixels).
constexpr double kWidth = 680;
constexpr double kPlotHeight = 220;
constexpr double kMarginLeft = 90, kMarginRight = 170, kMarginTop = 28, kMarginBottom = 44;
constexpr double kBarRightMargin = 70;  // room right of horizontal bars for their values
constexpr double kBarRow = 16;          // height of one horizontal bar row
constexpr double kBarLabelWidth = 250;  // room for tensor names left of horizontal bars
constexpr size_t kMaxLabelChars = 38;   // longer labels are shortened with "..."
constexpr int kTicks = 5;               // linear axis ticks
constexpr double kLogFloor = 1e-6;      // smallest value a log axis shows
constexpr double kLogCeiling = 1e12;    // largest value a log axis shows
// Presentation attributes inline (not CSS classes), so a chart renders the same on its own.
constexpr const char* kAxis = "stroke=\"#333\" stroke-width=\"1\"";
constexpr const char* kGrid = "stroke=\"#e5e5e5\" stroke-width=\"1\"";
constexpr const char* kRef = "stroke=\"#d62728\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"";
constexpr const char* kTitleStyle = " font-size=\"13\" font-weight=\"bold\"";
constexpr const char* kSmall = " font-size=\"10\"";
constexpr std::array<const char*, 8> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                                 "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string Fmt(const char* fmt, double a) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, a);
  return buf;
}

std::string Num(double v) { return Fmt("%.2f", v); }
std::string Tick(double v) { return Fmt("%.4g", v); }

std::string Shorten(const std::string& s) {
  return s.size() <= kMaxLabelChars ? s : s.substr(0, kMaxLabelChars - 3) + "...";
}

std::string Text(double x, double y, const std::string& text, const char* anchor = "start",
                 const char* extra = "") {
  return "<text x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" text-anchor=\"" + anchor + "\"" + extra +
         ">" + Escape(text) + "</text>";
}

std::string Line(double x1, double y1, double x2, double y2, const char* style) {
  return "<line x1=\"" + Num(x1) + "\" y1=\"" + Num(y1) + "\" x2=\"" + Num(x2) + "\" y2=\"" +
         Num(y2) + "\" " + style + "/>";
}

std::string Rect(double x, double y, double w, double h, const char* fill, const std::string& tip) {
  return "<rect x=\"" + Num(x) + "\" y=\"" + Num(y) + "\" width=\"" + Num(std::max(w, 0.0)) +
         "\" height=\"" + Num(std::max(h, 0.0)) + "\" fill=\"" + fill + "\"><title>" + Escape(tip) +
         "</title></rect>";
}

std::string Open(double height, const std::string& title) {
  return "<svg class=\"plot\" width=\"" + Num(kWidth) + "\" height=\"" + Num(height) +
         "\" viewBox=\"0 0 " + Num(kWidth) + " " + Num(height) +
         "\" role=\"img\" font-family=\"sans-serif\" font-size=\"11\"><title>" + Escape(title) +
         "</title>" + Text(kMarginLeft, 18, title, "start", kTitleStyle);
}

std::string NoData(const std::string& title) {
  return "<p class=\"nodata\">" + Escape(title) + ": no data</p>";
}

std::string Legend(const std::vector<std::string>& names, double x, double y) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    const double yy = y + 16.0 * static_cast<double>(i);
    out += Rect(x, yy - 9, 10, 10, kPalette[i % kPalette.size()], names[i]);
    out += Text(x + 14, yy, Shorten(names[i]));
  }
  return out;
}

// [lo, hi] padded so that a flat series still has a visible range.
void PadRange(double& lo, double& hi) {
  if (hi > lo) {
    const double pad = 0.05 * (hi - lo);
    lo -= pad;
    hi += pad;
    return;
  }
  const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 1e-3;
  lo -= pad;
  hi += pad;
}

// A round tick spacing (1, 2 or 5 times a power of ten) giving about kTicks ticks over `range`.
double NiceStep(double range) {
  if (!(range > 0) || !std::isfinite(range)) return 1;
  const double raw = range / kTicks, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  return (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
}

// Tick values: multiples of NiceStep within [lo, hi].
std::vector<double> NiceTicks(double lo, double hi) {
  const double step = NiceStep(hi - lo);
  std::vector<double> out;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9 && out.size() < 4 * kTicks;
       v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

// A byte step that is round in the unit (B, KiB, MiB, ...) the largest value is shown in.
double NiceByteStep(double top) {
  double unit = 1;
  while (top / unit >= 1024) unit *= 1024;
  return NiceStep(top / unit) * unit;
}

}  // namespace

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    // XML 1.0 cannot hold these control characters (JUnit files, SVG): drop them.
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t' && c != '\n' && c != '\r') continue;
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string HumanBytes(double bytes) {
  static constexpr std::array<const char*, 5> kUnits = {"B", "KiB", "MiB", "GiB", "TiB"};
  size_t u = 0;
  while (std::fabs(bytes) >= 1024 && u + 1 < kUnits.size()) {
    bytes /= 1024;
    ++u;
  }
  return Fmt(u == 0 ? "%.0f" : "%.1f", bytes) + " " + kUnits[u];
}

std::string Render(const LineChart& c) {
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : c.series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x_lo = std::min(x_lo, s.x[i]), x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]), y_hi = std::max(y_hi, s.y[i]);
    }
  if (!(x_lo <= x_hi)) return NoData(c.title);
  if (x_lo == x_hi) x_lo -= 0.5, x_hi += 0.5;
  PadRange(y_lo, y_hi);
  const double height = kMarginTop + kPlotHeight + kMarginBottom;
  const double x0 = kMarginLeft, x1 = kWidth - kMarginRight, y0 = kMarginTop + kPlotHeight,
               y1 = kMarginTop;
  auto px = [&](double x) { return x0 + (x - x_lo) / (x_hi - x_lo) * (x1 - x0); };
  auto py = [&](double y) { return y0 - (y - y_lo) / (y_hi - y_lo) * (y0 - y1); };
  std::string out = Open(height, c.title);
  out += Line(x0, y0, x1, y0, kAxis) + Line(x0, y0, x0, y1, kAxis);
  for (double yv : NiceTicks(y_lo, y_hi))
    out += Line(x0, py(yv), x1, py(yv), kGrid) + Text(x0 - 6, py(yv) + 4, Tick(yv), "end");
  for (double xv : NiceTicks(x_lo, x_hi))
    if (!c.integer_x || xv == std::floor(xv)) out += Text(px(xv), y0 + 16, Tick(xv), "middle");
  out += Text((x0 + x1) / 2, height - 8, c.x_label, "middle");
  out += Text(14, (y0 + y1) / 2, c.y_label, "middle",
              (" transform=\"rotate(-90 14 " + Num((y0 + y1) / 2) + ")\"").c_str());
  std::vector<std::string> names;
  for (size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    const char* color = kPalette[k % kPalette.size()];
    names.push_back(s.name);
    std::string points, marks;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      points += Num(px(s.x[i])) + "," + Num(py(s.y[i])) + " ";
      marks += "<circle cx=\"" + Num(px(s.x[i])) + "\" cy=\"" + Num(py(s.y[i])) + "\" r=\"" +
               Num(3.5 - static_cast<double>(k % 3)) + "\" fill=\"" + color + "\"><title>" +
               Escape(s.name + " at " + Tick(s.x[i]) + ": " + Fmt("%.9g", s.y[i])) +
               "</title></circle>";
    }
    out += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\"" +
           (s.dashed ? " stroke-dasharray=\"5 3\"" : "") + " points=\"" + points + "\"/>" + marks;
  }
  out += Legend(names, x1 + 12, y1 + 10);
  return out + "</svg>";
}

std::string Render(const LogBarChart& c) {
  if (c.bars.empty()) return NoData(c.title);
  auto clamp = [](double v) {
    return std::isnan(v) ? kLogCeiling : std::min(std::max(v, kLogFloor), kLogCeiling);
  };
  // The reference line never sits on the axis: the scale starts at least a decade below it.
  double lo = c.reference > 0 ? c.reference / 10 : kLogCeiling,
         hi = c.reference > 0 ? c.reference : kLogFloor;
  for (const Bar& b : c.bars) lo = std::min(lo, clamp(b.value)), hi = std::max(hi, clamp(b.value));
  const double dlo = std::floor(std::log10(lo)), dhi = std::max(std::ceil(std::log10(hi)), dlo + 1);
  const double height =
      kMarginTop + 6 + kBarRow * static_cast<double>(c.bars.size()) + kMarginBottom;
  const double x0 = kBarLabelWidth, x1 = kWidth - kBarRightMargin, y0 = kMarginTop + 6;
  const double y_end = y0 + kBarRow * static_cast<double>(c.bars.size());
  auto px = [&](double v) { return x0 + (std::log10(clamp(v)) - dlo) / (dhi - dlo) * (x1 - x0); };
  std::string out = Open(height, c.title);
  const double every = std::max(1.0, std::ceil((dhi - dlo) / 8));
  for (double d = dhi; d >= dlo; d -= every) {  // from the top decade down, so it is labelled
    const double v = std::pow(10.0, d);
    out +=
        Line(px(v), y0, px(v), y_end, kGrid) + Text(px(v), y_end + 14, Fmt("1e%.0f", d), "middle");
  }
  for (size_t i = 0; i < c.bars.size(); ++i) {
    const Bar& b = c.bars[i];
    const double y = y0 + kBarRow * static_cast<double>(i);
    const bool over = c.reference > 0 && !(b.value <= c.reference);
    out += Rect(x0, y + 2, px(b.value) - x0, kBarRow - 4, over ? "#d62728" : "#1f77b4",
                b.label + ": " + Fmt("%.4g", b.value));
    out += Text(x0 - 6, y + kBarRow - 4, Shorten(b.label), "end", kSmall);
    out +=
        Text(std::max(px(b.value), x0) + 4, y + kBarRow - 4, Fmt("%.3g", b.value), "start", kSmall);
  }
  out += Line(x0, y0, x0, y_end, kAxis);
  if (c.reference > 0) {
    out += Line(px(c.reference), y0 - 4, px(c.reference), y_end, kRef);
    out += Text(px(c.reference) - 4, y0 - 4, c.reference_label, "end",
                " font-size=\"10\" fill=\"#d62728\"");
  }
  out += Text((x0 + x1) / 2, height - 8, c.value_label + " (log scale)", "middle");
  return out + "</svg>";
}

std::string Render(const StackedBarChart& c) {
  if (c.groups.empty() || c.categories.empty()) return NoData(c.title);
  double top = 0;
  for (const auto& row : c.values) {
    double sum = 0;
    for (double v : row) sum += std::isfinite(v) ? std::max(v, 0.0) : 0;
    top = std::max(top, sum);
  }
  if (top <= 0) top = 1;
  const double step = c.bytes ? NiceByteStep(top) : NiceStep(top);
  top = std::ceil(top / step - 1e-9) * step;
  const double height = kMarginTop + kPlotHeight + kMarginBottom;
  const double x0 = kMarginLeft, x1 = kWidth - kMarginRight, y0 = kMarginTop + kPlotHeight,
               y1 = kMarginTop;
  auto py = [&](double v) { return y0 - v / top * (y0 - y1); };
  std::string out = Open(height, c.title);
  for (double v = 0; v <= top + step * 1e-9; v += step) {
    out += Line(x0, py(v), x1, py(v), kGrid) +
           Text(x0 - 6, py(v) + 4, c.bytes ? HumanBytes(v) : Tick(v), "end", kSmall);
  }
  const double slot = (x1 - x0) / static_cast<double>(c.groups.size());
  const double bar = std::min(48.0, slot * 0.7);
  for (size_t g = 0; g < c.groups.size(); ++g) {
    const double x = x0 + slot * (static_cast<double>(g) + 0.5);
    double base = 0;
    for (size_t k = 0; k < c.categories.size(); ++k) {
      const double v =
          g < c.values.size() && k < c.values[g].size() && std::isfinite(c.values[g][k])
              ? std::max(c.values[g][k], 0.0)
              : 0;
      out += Rect(x - bar / 2, py(base + v), bar, py(base) - py(base + v),
                  kPalette[k % kPalette.size()],
                  c.groups[g] + " " + c.categories[k] + ": " + (c.bytes ? HumanBytes(v) : Tick(v)));
      base += v;
    }
    out += Text(x, y0 + 16, c.groups[g], "middle", kSmall);
  }
  out += Line(x0, y0, x1, y0, kAxis) + Line(x0, y0, x0, y1, kAxis);
  out += Text(14, (y0 + y1) / 2, c.y_label, "middle",
              (" transform=\"rotate(-90 14 " + Num((y0 + y1) / 2) + ")\"").c_str());
  out += Legend(c.categories, x1 + 12, y1 + 10);
  return out + "</svg>";
}

}  // namespace paradiff::svg
