#include "tools/gate_output.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "fuzz/json_file.h"
#include "tools/html_report.h"
#include "tools/svg_plot.h"
#include "tools/workdir_html.h"

namespace paradiff {

namespace {

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

std::string Attr(const char* name, const std::string& value) {
  return std::string(" ") + name + "=\"" + svg::Escape(value) + "\"";
}

// Cases of one group, in the gate's order.
std::vector<const GateCase*> Group(const GateResult& r, const std::string& group) {
  std::vector<const GateCase*> out;
  for (const GateCase& c : r.cases)
    if (c.group == group) out.push_back(&c);
  return out;
}

constexpr const char* kGroups[] = {"suite", "regression", "campaign"};

}  // namespace

std::string GateJunitXml(const GateResult& r) {
  std::string body;
  for (const char* group : kGroups) {
    const std::vector<const GateCase*> cases = Group(r, group);
    if (cases.empty()) continue;
    int failures = 0, skipped = 0;
    double time = 0;
    std::string tests;
    for (const GateCase* c : cases) {
      failures += c->status == GateStatus::kFailed;
      skipped += c->status == GateStatus::kKnown || c->status == GateStatus::kSkipped;
      time += c->seconds;
      tests += "    <testcase" + Attr("classname", std::string("paradiff.gate.") + group) +
               Attr("name", c->name) + Attr("file", c->path) + Attr("time", Seconds(c->seconds)) +
               ">\n";
      if (c->status == GateStatus::kFailed)
        tests += "      <failure" + Attr("message", "expected " + c->expected + ", got " + c->got) +
                 Attr("type", c->got) + ">" + svg::Escape(c->message) + "</failure>\n";
      else if (c->status != GateStatus::kPassed)
        tests += "      <skipped" + Attr("message", c->message) + "/>\n";
      tests +=
          "      <system-out>" +
          svg::Escape("expected=" + c->expected + " got=" + c->got + " status=" + Name(c->status)) +
          "</system-out>\n    </testcase>\n";
    }
    body += "  <testsuite" + Attr("name", std::string("paradiff.gate.") + group) +
            Attr("tests", std::to_string(cases.size())) +
            Attr("failures", std::to_string(failures)) + Attr("errors", "0") +
            Attr("skipped", std::to_string(skipped)) + Attr("time", Seconds(time)) + ">\n" + tests +
            "  </testsuite>\n";
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites" + Attr("name", "paradiff gate") +
         Attr("tests", std::to_string(r.cases.size())) +
         Attr("failures", std::to_string(r.failed)) + Attr("errors", "0") +
         Attr("skipped", std::to_string(r.known + r.skipped)) + Attr("time", Seconds(r.seconds)) +
         ">\n" + body + "</testsuites>\n";
}

std::string GateHtml(const GateResult& r, const GateOptions& opts) {
  using svg::Escape;
  std::string body = "<p><span class=\"badge " + std::string(r.ok() ? "passed" : "failed") + "\">" +
                     (r.ok() ? "GATE PASSED" : "GATE FAILED") + "</span> " +
                     std::to_string(r.passed) + " passed, " + std::to_string(r.failed) +
                     " failed, " + std::to_string(r.known) + " known (baseline), " +
                     std::to_string(r.skipped) + " skipped, " + Seconds(r.seconds) +
                     " s</p><p>suite <code>" + svg::Escape(opts.suite_dir) + "</code>";
  if (!opts.regression_dir.empty())
    body += ", regression corpus <code>" + svg::Escape(opts.regression_dir) + "</code>";
  body += ", baseline of " + std::to_string(opts.baseline.size()) + " signature(s)";
  if (r.campaign_ran)
    body += ", campaign <code>" + svg::Escape(r.campaign_workdir) + "</code> (seed " +
            std::to_string(opts.campaign.seed) + ", " + std::to_string(r.campaign.execs) +
            " execs)";
  body +=
      "</p><table><tr><th>group</th><th>config</th><th>status</th><th>expected</th><th>got</th>"
      "<th>time (s)</th><th>message</th></tr>";
  // Sections: failed first, then known, then the rest, each in gate order.
  std::vector<std::pair<int, size_t>> order;
  for (size_t i = 0; i < r.cases.size(); ++i) {
    const GateStatus s = r.cases[i].status;
    order.push_back({s == GateStatus::kFailed ? 0 : s == GateStatus::kKnown ? 1 : 2, i});
  }
  std::stable_sort(order.begin(), order.end());
  std::string sections;
  for (const auto& [rank, i] : order) {
    const GateCase& c = r.cases[i];
    const std::string anchor = html::AnchorId(c.group + "-" + c.name);
    const bool has_report = c.report.is_object();
    body += "<tr><td>" + svg::Escape(c.group) + "</td><td>" +
            (has_report ? "<a href=\"#" + svg::Escape(anchor) + "\">" + svg::Escape(c.name) + "</a>"
                        : svg::Escape(c.name)) +
            "</td><td><span class=\"badge " + Name(c.status) + "\">" + Name(c.status) +
            "</span></td><td>" + svg::Escape(c.expected) + "</td><td>" + svg::Escape(c.got) +
            "</td><td>" + Seconds(c.seconds) + "</td><td class=\"msg\">" + svg::Escape(c.message) +
            "</td></tr>";
    if (has_report)
      sections +=
          html::ReportSection(c.report, anchor, c.group + ": " + c.name,
                              "<p>gate status <b>" + std::string(Name(c.status)) +
                                  "</b>, expected <code>" + svg::Escape(c.expected) +
                                  "</code>, file <code>" + svg::Escape(c.path) + "</code></p>");
  }
  body += "</table>" + sections;
  if (r.campaign_ran)
    body += CampaignHistoryHtml(ReadJsonOrNull(r.campaign_workdir + "/stats.json"));
  return html::Page(std::string("paradiff gate: ") + (r.ok() ? "passed" : "FAILED"), body);
}

}  // namespace paradiff
