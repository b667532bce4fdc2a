#include "tools/html_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include <vector>

#include "tools/svg_plot.h"

namespace paradiff::html {

namespace {

using svg::Escape;

constexpr size_t kMaxTensorBars = 40;  // error / bound bars per report (the worst ones)
constexpr std::array<const char*, 6> kMemoryOrder = {"params", "grads",   "optimizer",
                                                     "master", "padding", "buffers_peak"};

constexpr const char* kStyle = R"(
body{font-family:sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:36px}
h3{font-size:15px;margin-bottom:4px}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}
pre{background:#f7f7f7;padding:8px;font-size:12px;overflow-x:auto}
.badge{display:inline-block;padding:1px 8px;border-radius:8px;font-size:12px;color:#fff}
.pass,.passed{background:#2ca02c}.finding,.failed{background:#d62728}.known{background:#ff7f0e}
.skipped,.invalid{background:#7f7f7f}
.msg{font-family:monospace;font-size:13px;white-space:pre-wrap}
svg.plot{display:block;margin:8px 0}
.nodata{color:#777;font-style:italic;font-size:13px}
)";

std::string Td(const std::string& s) { return "<td>" + Escape(s) + "</td>"; }

std::string Str(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const nlohmann::json& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string LossPlot(const nlohmann::json& steps) {
  svg::LineChart c;
  c.title = "Loss per step";
  c.x_label = "step";
  c.y_label = "loss";
  c.integer_x = true;
  c.series = {{"distributed", {}, {}, false},
              {"same precision", {}, {}, true},
              {"fp64 truth", {}, {}, true}};
  const std::array<const char*, 3> keys = {"loss_dist", "loss_same_precision", "loss_truth"};
  if (steps.is_array())
    for (const auto& s : steps)
      for (size_t k = 0; k < keys.size(); ++k) {
        c.series[k].x.push_back(JsonNumber(s.value("step", nlohmann::json(0))));
        c.series[k].y.push_back(JsonNumber(s.value(keys[k], nlohmann::json(nullptr))));
      }
  // The three curves usually overlap: also plot each one's distance from the truth.
  svg::LineChart d;
  d.title = "Loss minus fp64 truth per step";
  d.x_label = "step";
  d.y_label = "loss - truth";
  d.integer_x = true;
  d.series = {{"distributed - truth", c.series[0].x, {}, false},
              {"same precision - truth", c.series[1].x, {}, true}};
  for (size_t i = 0; i < c.series[2].y.size(); ++i) {
    d.series[0].y.push_back(c.series[0].y[i] - c.series[2].y[i]);
    d.series[1].y.push_back(c.series[1].y[i] - c.series[2].y[i]);
  }
  return svg::Render(c) + svg::Render(d);
}

// The worst error / bound per kind:tensor over all steps, worst first.
std::string RatioPlot(const nlohmann::json& comparisons, size_t& total) {
  std::map<std::string, double> worst;
  if (comparisons.is_array())
    for (const auto& c : comparisons) {
      const double err = JsonNumber(c.value("error", nlohmann::json(0)));
      const double bound = JsonNumber(c.value("bound", nlohmann::json(0)));
      const double ratio =
          bound > 0 ? err / bound : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
      const std::string tensor = c.value("tensor", "");
      const std::string key = c.value("kind", "?") + (tensor.empty() ? "" : ":" + tensor);
      auto it = worst.find(key);
      if (it == worst.end() || ratio > it->second || std::isnan(ratio)) worst[key] = ratio;
    }
  total = worst.size();
  svg::LogBarChart chart;
  chart.title = "Error / bound per tensor (worst over steps; " +
                std::to_string(std::min(total, kMaxTensorBars)) + " of " + std::to_string(total) +
                " shown, worst first)";
  chart.value_label = "error / bound";
  chart.reference = 1.0;
  chart.reference_label = "bound (1.0)";
  for (const auto& [k, v] : worst) chart.bars.push_back({k, v});
  std::stable_sort(chart.bars.begin(), chart.bars.end(), [](const svg::Bar& a, const svg::Bar& b) {
    return (std::isnan(a.value) ? INFINITY : a.value) > (std::isnan(b.value) ? INFINITY : b.value);
  });
  if (chart.bars.size() > kMaxTensorBars) chart.bars.resize(kMaxTensorBars);
  if (chart.bars.empty())
    chart.title = "Error / bound per tensor (no numeric comparison: another oracle decided first)";
  return svg::Render(chart);
}

std::string MemoryPlot(const nlohmann::json& ranks) {
  svg::StackedBarChart c;
  c.title = "Memory per rank by category (after the last step)";
  c.y_label = "bytes";
  c.bytes = true;
  std::set<std::string> seen;
  if (ranks.is_array())
    for (const auto& r : ranks)
      if (r.contains("memory_bytes") && r["memory_bytes"].is_object())
        for (auto it = r["memory_bytes"].begin(); it != r["memory_bytes"].end(); ++it)
          seen.insert(it.key());
  for (const char* k : kMemoryOrder)
    if (seen.erase(k)) c.categories.push_back(k);
  c.categories.insert(c.categories.end(), seen.begin(), seen.end());
  if (ranks.is_array())
    for (const auto& r : ranks) {
      c.groups.push_back("rank " + Str(r, "rank"));
      std::vector<double> row;
      for (const auto& cat : c.categories)
        row.push_back(r.contains("memory_bytes")
                          ? JsonNumber(r["memory_bytes"].value(cat, nlohmann::json(0)))
                          : 0);
      c.values.push_back(std::move(row));
    }
  if (c.categories.empty()) {
    c.groups.clear();
    c.title += ": none recorded (the run failed before its memory was accounted)";
  }
  return svg::Render(c);
}

std::string CollectivesTable(const nlohmann::json& ranks) {
  std::set<std::string> ops;
  if (!ranks.is_array() || ranks.empty()) return "";
  for (const auto& r : ranks)
    if (r.contains("collectives") && r["collectives"].is_object())
      for (auto it = r["collectives"].begin(); it != r["collectives"].end(); ++it)
        ops.insert(it.key());
  std::string out = "<h3>Collective calls per rank</h3><table><tr><th>rank</th>";
  for (const auto& op : ops) out += "<th>" + Escape(op) + "</th>";
  out += "<th>memory grew</th></tr>";
  for (const auto& r : ranks) {
    out += "<tr>" + Td(Str(r, "rank"));
    for (const auto& op : ops)
      out += Td(r.contains("collectives") ? r["collectives"].value(op, nlohmann::json(0)).dump()
                                          : "0");
    out += Td(Str(r, "memory_grew")) + "</tr>";
  }
  return out + "</table>";
}

// What each oracle said (oracles/check.h OracleOutcome), when the report has it.
std::string OraclesTable(const nlohmann::json& oracles) {
  if (!oracles.is_array() || oracles.empty()) return "";
  std::string out =
      "<h3>Oracles</h3><table><tr><th>oracle</th><th>status</th><th>note</th><th>seconds</th></tr>";
  for (const auto& o : oracles)
    out += "<tr>" + Td(Str(o, "name")) + Td(Str(o, "status")) + Td(Str(o, "note")) +
           Td(Str(o, "seconds")) + "</tr>";
  return out + "</table>";
}

std::string LocalizationTable(const nlohmann::json& where) {
  static constexpr std::array<const char*, 12> kKeys = {"step",   "phase", "tensor", "tensor_kind",
                                                        "layer",  "rank",  "index",  "expected",
                                                        "actual", "error", "bound",  "ratio"};
  std::string head, row;
  for (const char* k : kKeys) {
    head += "<th>" + std::string(k) + "</th>";
    row += Td(Str(where, k));
  }
  return "<table><tr>" + head + "</tr><tr>" + row + "</tr></table>";
}

}  // namespace

double JsonNumber(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return v.get<bool>() ? 1 : 0;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  return NAN;
}

std::string AnchorId(const std::string& text) {
  std::string out = "r-";
  for (char c : text)
    out +=
        std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '-';
  return out;
}

std::string Page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
         Escape(title) + "</title><style>" + kStyle + "</style></head><body>\n<h1>" +
         Escape(title) + "</h1>\n" + body + "\n</body></html>\n";
}

std::string JsonBlock(const std::string& summary, const nlohmann::json& doc, bool open) {
  return std::string("<details") + (open ? " open" : "") + "><summary>" + Escape(summary) +
         "</summary><pre>" + Escape(doc.dump(2)) + "</pre></details>";
}

std::string ReportSection(const nlohmann::json& report, const std::string& anchor,
                          const std::string& heading, const std::string& extra) {
  const nlohmann::json verdict = report.value("verdict", nlohmann::json::object());
  const std::string kind = verdict.value("kind", "?");
  const bool pass = kind == "pass" || kind == "inconclusive";
  std::string out = "<section id=\"" + Escape(anchor) + "\"><h2>" + Escape(heading) +
                    " <span class=\"badge " + (pass ? "pass" : "finding") + "\">" + Escape(kind) +
                    "</span></h2>" + extra;
  out += "<p>signature <code>" + Escape(verdict.value("signature", "?")) + "</code>, seed " +
         Escape(Str(report, "seed")) + ", oracle " + Escape(verdict.value("oracle", "-")) + "</p>";
  if (!verdict.value("message", "").empty())
    out += "<p class=\"msg\">" + Escape(verdict.value("message", "")) + "</p>";
  if (!pass && verdict.contains("where"))
    out += "<h3>Localization</h3>" + LocalizationTable(verdict["where"]);
  size_t tensors = 0;
  out += LossPlot(report.value("steps", nlohmann::json::array()));
  out += RatioPlot(report.value("comparisons", nlohmann::json::array()), tensors);
  out += MemoryPlot(report.value("ranks", nlohmann::json::array()));
  out += CollectivesTable(report.value("ranks", nlohmann::json::array()));
  out += OraclesTable(report.value("oracles", nlohmann::json::array()));
  if (report.contains("timing_s"))
    out += "<p>time (s): " + Escape(report["timing_s"].dump()) + "</p>";
  if (report.contains("config")) out += JsonBlock("config", report["config"]);
  return out + "</section>\n";
}

}  // namespace paradiff::html
