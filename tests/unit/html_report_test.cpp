// The HTML report pieces: SVG charts (lines, log bars with the bound line, stacked bytes), the
// section of one checked config, and a campaign work dir page; everything self-contained.
#include "tools/html_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/config_json.h"
#include "oracles/report.h"
#include "tests/unit/engine_test_util.h"
#include "tools/svg_plot.h"
#include "tools/workdir_html.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

void ExpectSelfContained(const std::string& html) {
  for (const char* external :
       {"http://", "https://", "<script", "src=", "url(", "@import", "<link"})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
}

TEST(SvgPlot, LineChartDropsNonFiniteAndEscapes) {
  svg::LineChart c{
      "loss <per> step", "step", "loss", {{"a&b", {0, 1, 2}, {1.0, NAN, 3.0}, false}}, true};
  const std::string s = svg::Render(c);
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_NE(s.find("loss &lt;per&gt; step"), std::string::npos);
  EXPECT_NE(s.find("a&amp;b"), std::string::npos);
  EXPECT_EQ(Count(s, "<circle"), 2u);
  EXPECT_EQ(svg::Render(svg::LineChart{"empty", "x", "y", {}}).find("<svg"), std::string::npos);
}

TEST(SvgPlot, LogBarsMarkTheBound) {
  svg::LogBarChart c{
      "ratios", "error / bound", {{"ok", 0.01}, {"bad", 300}, {"zero", 0}}, 1.0, "bound"};
  const std::string s = svg::Render(c);
  EXPECT_EQ(Count(s, "<rect"), 3u);
  EXPECT_EQ(Count(s, "fill=\"#d62728\"><title>"), 1u);  // only the bar of "bad" is over the bound
  EXPECT_NE(s.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(s.find("1e3"), std::string::npos);
  EXPECT_NE(s.find("1e-1"), std::string::npos);
}

TEST(SvgPlot, StackedBytes) {
  svg::StackedBarChart c{
      "memory", "bytes", {"rank 0", "rank 1"}, {"params", "grads"}, {{2048, 1024}, {4096, 0}},
      true};
  const std::string s = svg::Render(c);
  EXPECT_EQ(Count(s, "<rect"), 4u + 2u);  // segments + legend swatches
  EXPECT_NE(s.find("KiB"), std::string::npos);
  EXPECT_EQ(svg::HumanBytes(1536), "1.5 KiB");
}

TEST(HtmlReport, FindingSectionHasLocalizationAndPlots) {
  Config c = testing::SmallConfig(1, 2);
  c.batch.accumulation_steps = 3;
  c.faults = {"gas.overwrite_grad"};
  const CheckResult res = testing::Check(c);
  ASSERT_TRUE(IsFinding(res.verdict.kind));
  const std::string page = html::Page("t", html::ReportSection(ReportJson(c, res), "x", "gas"));
  ExpectSelfContained(page);
  EXPECT_EQ(Count(page, "<svg"), 4u);  // loss, loss - truth, error / bound, memory
  EXPECT_NE(page.find("Localization"), std::string::npos);
  EXPECT_NE(page.find(res.verdict.Signature()), std::string::npos);
  EXPECT_NE(page.find("<section id=\"x\">"), std::string::npos);
}

TEST(HtmlReport, WorkDirPageListsFindingsAndHistory) {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("paradiff_html_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path f = dir / "findings" / "invariant.tiling.grad.norm.gradient";
  fs::create_directories(f);
  std::ofstream(dir / "stats.json") << R"({"seed": 3, "execs": 10, "history": [
      {"elapsed_s": 1, "execs": 4, "findings": 1, "unique": 1, "execs_per_s": 4, "pairs_covered": 10, "pairs_possible": 20},
      {"elapsed_s": 2, "execs": 10, "findings": 2, "unique": 1, "execs_per_s": 5, "pairs_covered": 15, "pairs_possible": 30}]})";
  std::ofstream(f / "meta.json")
      << R"({"signature": "invariant.tiling.grad.norm.gradient", "kind": "invariant", "count": 2})";
  std::ofstream(f / "minimize.json")
      << R"({"status": "minimized", "complete": true, "steps": [{"change": "steps 2->1"}]})";
  std::ofstream(f / "minimized.json") << WriteConfig(testing::SmallConfig(2, 3));
  std::ofstream(f / "report.json")
      << R"({"verdict": {"kind": "invariant", "signature": "invariant.tiling.grad.norm.gradient"}})";
  StatusOr<std::string> page = WorkDirHtml(dir.string());
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ExpectSelfContained(page.value());
  EXPECT_NE(page.value().find("href=\"#r-invariant.tiling.grad.norm.gradient\""),
            std::string::npos);
  EXPECT_NE(page.value().find("id=\"r-invariant.tiling.grad.norm.gradient\""), std::string::npos);
  EXPECT_NE(page.value().find("steps 2-&gt;1"), std::string::npos);
  EXPECT_NE(page.value().find("minimized config"), std::string::npos);
  EXPECT_NE(page.value().find("Feature-pair coverage"), std::string::npos);
  EXPECT_GE(Count(page.value(), "<svg"), 3u);
  EXPECT_FALSE(WorkDirHtml((dir / "findings").string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace paradiff
