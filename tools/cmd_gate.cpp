// `paradiff gate --suite DIR [--regression DIR] [--budget 10m] [--baseline FILE] --junit FILE
// --json FILE --html FILE`: the pre-release gate (fuzz/gate.h). Prints one line per case and one
// SUMMARY line, writes the requested outputs atomically. Exit 0 when nothing new fails, 3 when
// something does, 2 on bad input (missing directory, malformed baseline or expectation, bad
// options).
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "core/self_exe.h"
#include "fuzz/gate.h"
#include "targets/system_under_test.h"
#include "tools/cli.h"
#include "tools/gate_output.h"

namespace paradiff {

namespace {

// The paradiff binary itself: the gate's campaign starts it as `paradiff worker`.
bool Fail(const std::string& message) {
  std::cerr << "ERROR: " << message << "\n";
  return false;
}

bool BuildOptions(const Args& a, GateOptions& o) {
  if (!a.positional.empty())
    return Fail("gate takes no positional arguments (see paradiff gate --help)");
  if (a.suite.empty()) return Fail("gate needs --suite DIR");
  o.suite_dir = a.suite;
  o.regression_dir = a.regression;
  o.timeout = std::chrono::milliseconds(a.timeout_ms);
  o.oracles = a.oracles;
  o.campaign.oracles = a.oracles;
  o.campaign.target = a.target;
  StatusOr<SystemUnderTest> sut = LoadSystemUnderTest(a.target);
  if (!sut.ok()) return Fail("--target " + a.target + ": " + sut.status().ToString());
  o.system = sut.value();
  if (!a.budget.empty()) {
    o.budget_s = ParseDuration(a.budget);
    if (o.budget_s <= 0)
      return Fail("--budget=" + a.budget + ": expected a duration like 90s or 10m");
  }
  if (a.minimize_budget_s < 0) return Fail("--minimize-budget-s must not be negative");
  o.campaign.workdir = a.workdir;
  o.campaign.seed = a.seed;
  o.campaign.jobs = a.jobs;
  o.campaign.exe = ParadiffExecutable();
  o.campaign.minimize_budget_s = a.minimize_budget_s;
  if (!a.baseline.empty()) {
    StatusOr<std::set<std::string>> b = LoadBaseline(a.baseline);
    if (!b.ok()) return Fail(b.status().ToString());
    o.baseline = b.value();
  }
  return true;
}

}  // namespace

int CmdGate(const Args& a) {
  GateOptions o;
  if (!BuildOptions(a, o)) return kExitBadInput;
  std::printf("INFO: gate suite=%s regression=%s budget=%gs baseline=%zu signature(s)\n",
              o.suite_dir.c_str(), o.regression_dir.empty() ? "-" : o.regression_dir.c_str(),
              o.budget_s, o.baseline.size());
  std::fflush(stdout);
  StatusOr<GateResult> r = RunGate(o, std::cout);
  if (!r.ok()) {
    for (const auto& e : r.status().errors()) std::cerr << "ERROR: " << e.message << "\n";
    return kExitBadInput;
  }
  const GateResult& g = r.value();
  Status w;
  if (!a.junit.empty()) w.Merge(WriteFileAtomic(a.junit, GateJunitXml(g)));
  if (!a.json.empty()) w.Merge(WriteFileAtomic(a.json, GateJson(g, o).dump(2) + "\n"));
  if (!a.html.empty()) w.Merge(WriteFileAtomic(a.html, GateHtml(g, o)));
  if (!w.ok()) {
    std::cerr << "ERROR: " << w.ToString() << "\n";
    return kExitInternal;
  }
  for (const GateCase& c : g.cases)
    if (c.status == GateStatus::kFailed)
      std::printf("INFO: failed: %s %s: expected %s, got %s\n", c.group.c_str(), c.name.c_str(),
                  c.expected.c_str(), c.got.c_str());
  std::printf(
      "SUMMARY: paradiff: gate %s cases=%zu passed=%d failed=%d known=%d skipped=%d campaign=%s "
      "elapsed=%.1fs\n",
      g.ok() ? "PASSED" : "FAILED", g.cases.size(), g.passed, g.failed, g.known, g.skipped,
      g.campaign_ran ? g.campaign_workdir.c_str() : "none", g.seconds);
  return g.ok() ? kExitPass : kExitFinding;
}

}  // namespace paradiff
