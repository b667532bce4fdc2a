// The gate: suite and regression cases pass or fail against their expectations, a baseline turns
// known signatures into "known" (the gate passes), a pass where a finding was expected always
// fails; baselines load from a list or from a previous gate's JSON; the JUnit XML, JSON and HTML
// outputs carry every case, and the HTML is self-contained with its plots.
#include "fuzz/gate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config_json.h"
#include "tests/unit/engine_test_util.h"
#include "tools/gate_output.h"
#include "tools/svg_plot.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;
using testing::SmallConfig;

class GateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("paradiff_gate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "suite");
    fs::create_directories(dir_ / "regression");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  static Config Uneven() {
    Config c = SmallConfig(2, 3);
    c.model.layers = 1;
    c.model.vocab = 2;
    c.model.hidden = 4;
    c.model.heads = 1;
    c.model.kv_heads = 1;
    c.model.ffn = 1;  // an odd parameter count: dp=2 does not divide it
    c.faults = {"zero.uneven_last_shard"};
    return c;
  }
  GateResult Run(const std::set<std::string>& baseline = {}) {
    opts_.suite_dir = (dir_ / "suite").string();
    opts_.regression_dir = (dir_ / "regression").string();
    opts_.baseline = baseline;
    std::ostringstream log;
    StatusOr<GateResult> r = RunGate(opts_, log);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.value();
  }
  fs::path dir_;
  GateOptions opts_;
};

TEST_F(GateTest, CleanSuitePasses) {
  Write("suite/a.json", WriteConfig(SmallConfig(2, 1)));
  Write("suite/b.json", WriteConfig(SmallConfig(3, 3)));
  const GateResult r = Run();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.passed, 2);
  EXPECT_EQ(r.cases.size(), 2u);
  EXPECT_FALSE(r.campaign_ran);
}

TEST_F(GateTest, NewFindingFailsUnlessInTheBaseline) {
  Write("suite/a.json", WriteConfig(SmallConfig(2, 1)));
  Write("suite/bug.json", WriteConfig(Uneven()));
  GateResult r = Run();
  EXPECT_FALSE(r.ok());
  ASSERT_EQ(r.failed, 1);
  const GateCase& bug = r.cases[1];
  EXPECT_EQ(bug.status, GateStatus::kFailed);
  EXPECT_EQ(bug.expected, "pass");
  EXPECT_EQ(bug.got, "invariant.tiling.grad.norm.gradient");
  const nlohmann::json j = GateJson(r, opts_);
  EXPECT_EQ(j["new_signatures"], nlohmann::json({bug.got}));
  EXPECT_FALSE(j["ok"].get<bool>());

  r = Run({bug.got});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.known, 1);
  EXPECT_EQ(r.cases[1].status, GateStatus::kKnown);
}

TEST_F(GateTest, RegressionExpectationsAndFixedBugs) {
  Write("regression/bug.json", WriteConfig(Uneven()));
  Write("regression/bug.expect.json", "{\"signature\": \"invariant.tiling.grad.norm.gradient\"}");
  Write("regression/clean.json", WriteConfig(SmallConfig(2, 2)));
  Write("regression/clean.expect.json", "{\"signature\": \"pass\"}");
  GateResult r = Run();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.passed, 2);
  // A config that passes where a finding was expected fails, baseline or not.
  Write("regression/clean.expect.json", "{\"signature\": \"invariant.tiling.grad.norm.gradient\"}");
  r = Run({"invariant.tiling.grad.norm.gradient"});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed, 1);
}

TEST_F(GateTest, MissingSuiteIsBadInput) {
  opts_.suite_dir = (dir_ / "nope").string();
  std::ostringstream log;
  EXPECT_FALSE(RunGate(opts_, log).ok());
}

TEST_F(GateTest, BaselineFormats) {
  Write("list.json", "[\"a\", \"b\"]");
  Write("gate.json", "{\"paradiff_gate\": 1, \"signatures\": [\"c\"]}");
  Write("bad.json", "{\"x\": 1}");
  StatusOr<std::set<std::string>> b = LoadBaseline((dir_ / "list.json").string());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), (std::set<std::string>{"a", "b"}));
  b = LoadBaseline((dir_ / "gate.json").string());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value(), (std::set<std::string>{"c"}));
  EXPECT_FALSE(LoadBaseline((dir_ / "bad.json").string()).ok());
  EXPECT_FALSE(LoadBaseline((dir_ / "missing.json").string()).ok());
}

TEST_F(GateTest, OutputsCarryEveryCase) {
  Write("suite/a.json", WriteConfig(SmallConfig(2, 1)));
  Write("suite/bug.json", WriteConfig(Uneven()));
  const GateResult r = Run();
  const std::string xml = GateJunitXml(r);
  EXPECT_NE(xml.find("<testsuites name=\"paradiff gate\" tests=\"2\" failures=\"1\""),
            std::string::npos)
      << xml;
  EXPECT_NE(xml.find("<testcase classname=\"paradiff.gate.suite\" name=\"bug.json\""),
            std::string::npos);
  EXPECT_NE(xml.find("<failure message=\"expected pass, got invariant.tiling.grad.norm.gradient\""),
            std::string::npos);
  const std::string html = GateHtml(r, opts_);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("GATE FAILED"), std::string::npos);
  EXPECT_NE(html.find("href=\"#r-suite-bug.json\""), std::string::npos);
  EXPECT_NE(html.find("id=\"r-suite-bug.json\""), std::string::npos);
  for (const char* external : {"http://", "https://", "<script", "src=", "url("})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
}

TEST(Escape, DropsControlCharacters) {
  EXPECT_EQ(svg::Escape("a<b>&\"'\x01\n"), "a&lt;b&gt;&amp;&quot;&apos;\n");
}

}  // namespace
}  // namespace paradiff
