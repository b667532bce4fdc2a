#include "tools/workdir_html.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "fuzz/finding_minimizer.h"
#include "fuzz/json_file.h"
#include "fuzz/workdir.h"
#include "tools/html_report.h"
#include "tools/svg_plot.h"

namespace paradiff {

namespace fs = std::filesystem;

namespace {

using svg::Escape;

std::string Td(const std::string& s) { return "<td>" + Escape(s) + "</td>"; }

std::string Text(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

svg::Series SeriesOf(const nlohmann::json& history, const char* key, const std::string& name,
                     bool dashed) {
  svg::Series s{name, {}, {}, dashed};
  for (const auto& h : history) {
    s.x.push_back(html::JsonNumber(h.value("elapsed_s", nlohmann::json(nullptr))));
    s.y.push_back(html::JsonNumber(h.value(key, nlohmann::json(nullptr))));
  }
  return s;
}

// The minimization outcome of one finding, for the findings table.
std::string MinimizedText(const nlohmann::json& mini) {
  if (!mini.is_object()) return "no";
  const std::string status = mini.value("status", "?");
  if (status != Name(MinimizeStatus::kMinimized)) return status;
  return std::to_string(mini.value("steps", nlohmann::json::array()).size()) + " steps" +
         (mini.value("complete", false) ? ", 1-minimal" : ", budget hit");
}

std::string FindingExtra(const fs::path& dir, const nlohmann::json& meta,
                         const nlohmann::json& mini) {
  std::string out =
      "<table><tr><th>kind</th><th>oracle</th><th>count</th><th>first seen</th>"
      "<th>last seen</th><th>seed</th></tr><tr>" +
      Td(Text(meta, "kind")) + Td(Text(meta, "oracle")) + Td(Text(meta, "count")) +
      Td("execution " + Text(meta, "first_seen_index") + " at " + Text(meta, "first_seen_s") +
         " s") +
      Td("execution " + Text(meta, "last_seen_index")) + Td(Text(meta, "seed")) + "</tr></table>";
  out += "<p>reproduce: <code>paradiff run " + Escape((dir / "config.json").string()) + "</code>";
  if (fs::exists(dir / "minimized.json"))
    out += " &middot; minimized: <code>paradiff run " + Escape((dir / "minimized.json").string()) +
           "</code>";
  out += "</p>";
  if (mini.is_object()) {
    out += "<p>minimization: " + Escape(MinimizedText(mini)) +
           (mini.contains("reason") ? " (" + Escape(Text(mini, "reason")) + ")" : "") + "</p>";
    if (mini.contains("steps") && !mini["steps"].empty()) {
      out += "<ol>";
      for (const auto& s : mini["steps"]) out += "<li>" + Escape(Text(s, "change")) + "</li>";
      out += "</ol>";
    }
  }
  const nlohmann::json minimized = ReadJsonOrNull((dir / "minimized.json").string());
  if (!minimized.is_null()) out += html::JsonBlock("minimized config", minimized, true);
  return out;
}

}  // namespace

std::string CampaignHistoryHtml(const nlohmann::json& stats) {
  if (!stats.is_object() || !stats.contains("history") || !stats["history"].is_array() ||
      stats["history"].empty())
    return "";
  const nlohmann::json& h = stats["history"];
  svg::LineChart found{"Findings over time",
                       "elapsed (s)",
                       "count",
                       {SeriesOf(h, "findings", "findings", false),
                        SeriesOf(h, "unique", "unique signatures", true)}};
  svg::LineChart speed{"Executions per second",
                       "elapsed (s)",
                       "execs/s",
                       {SeriesOf(h, "execs_per_s", "execs/s", false)}};
  svg::LineChart cover{"Feature-pair coverage",
                       "elapsed (s)",
                       "pairs",
                       {SeriesOf(h, "pairs_covered", "pairs covered", false),
                        SeriesOf(h, "pairs_possible", "pairs possible", true)}};
  return "<h2 id=\"history\">Campaign history</h2>" + svg::Render(found) + svg::Render(speed) +
         svg::Render(cover);
}

std::string FindingsHtml(const std::string& workdir) {
  std::vector<fs::path> dirs;
  for (const auto& sig : RecordedSignatures(workdir, "findings"))
    dirs.push_back(fs::path(workdir) / "findings" / sig);
  std::string table = "<h2 id=\"findings\">Findings (" + std::to_string(dirs.size()) + ")</h2>";
  if (dirs.empty()) return table + "<p>none</p>";
  table +=
      "<table><tr><th>signature</th><th>kind</th><th>count</th><th>first seen (s)</th>"
      "<th>minimized</th></tr>";
  std::string sections;
  for (const fs::path& dir : dirs) {
    const std::string sig = dir.filename().string();
    const nlohmann::json meta = ReadJsonOrNull((dir / "meta.json").string());
    const nlohmann::json mini = ReadJsonOrNull((dir / "minimize.json").string());
    nlohmann::json report = ReadJsonOrNull((dir / "report.json").string());
    if (!report.is_object()) report = nlohmann::json::object();
    const std::string anchor = html::AnchorId(sig);
    table += "<tr><td><a href=\"#" + Escape(anchor) + "\">" + Escape(sig) + "</a></td>" +
             Td(Text(meta, "kind")) + Td(Text(meta, "count")) + Td(Text(meta, "first_seen_s")) +
             Td(MinimizedText(mini)) + "</tr>";
    sections += html::ReportSection(report, anchor, sig, FindingExtra(dir, meta, mini));
  }
  return table + "</table>" + sections;
}

// Inconclusive checks by reason (DIR/inconclusive/<signature>/, fuzz/workdir.h): a table, no
// sections; each row names the config that reruns it.
std::string InconclusiveHtml(const std::string& workdir) {
  std::vector<fs::path> dirs;
  for (const auto& sig : RecordedSignatures(workdir, "inconclusive"))
    dirs.push_back(fs::path(workdir) / "inconclusive" / sig);
  std::string table =
      "<h2 id=\"inconclusive\">Inconclusive (" + std::to_string(dirs.size()) + " reasons)</h2>";
  if (dirs.empty()) return table + "<p>none</p>";
  table += "<table><tr><th>signature</th><th>count</th><th>first seen</th><th>config</th></tr>";
  for (const fs::path& dir : dirs) {
    const nlohmann::json meta = ReadJsonOrNull((dir / "meta.json").string());
    table += "<tr>" + Td(dir.filename().string()) + Td(Text(meta, "count")) +
             Td("execution " + Text(meta, "first_seen_index")) +
             Td((dir / "config.json").string()) + "</tr>";
  }
  return table + "</table>";
}

StatusOr<std::string> WorkDirHtml(const std::string& workdir) {
  const fs::path root(workdir);
  if (!fs::exists(root / "stats.json") && !fs::is_directory(root / "findings"))
    return Status::Error(workdir,
                         workdir + ": not a campaign work dir (no stats.json, no findings/)");
  const nlohmann::json stats = ReadJsonOrNull((root / "stats.json").string());
  std::string body =
      "<table><tr><th>work dir</th><th>seed</th><th>inject</th><th>execs</th><th>findings</th>"
      "<th>inconclusive</th><th>rejected</th><th>elapsed (s)</th></tr><tr>" +
      Td(workdir) + Td(Text(stats, "seed")) + Td(Text(stats, "inject")) + Td(Text(stats, "execs")) +
      Td(Text(stats, "findings")) + Td(Text(stats, "inconclusive")) + Td(Text(stats, "rejected")) +
      Td(Text(stats, "elapsed_s")) + "</tr></table>";
  const std::string history = CampaignHistoryHtml(stats);
  body +=
      "<p><a href=\"#findings\">findings</a> &middot; <a href=\"#inconclusive\">inconclusive</a>" +
      std::string(history.empty() ? "" : " &middot; <a href=\"#history\">history</a>") + "</p>";
  body += FindingsHtml(workdir) + InconclusiveHtml(workdir) + history;
  return html::Page("paradiff campaign " + workdir, body);
}

}  // namespace paradiff
