// The pre-release gate (`paradiff gate`): checks a suite of configs (each expected to pass unless
// its NAME.expect.json says otherwise), the regression corpus (each must match its expectation),
// and optionally fuzzes for a short budget with RunCampaign. Owns the classification of every
// config or campaign finding into a gate case and the gate's verdict: it passes only if no case
// failed. With a baseline of known signatures, a case that shows a finding whose signature is in
// the baseline is "known", not failed; a config that passes where a finding was expected, or one
// that is invalid, always fails. Configs this engine build cannot run (yet) are "skipped".
// Writers for JUnit XML and HTML live in tools/ (gate_output.h); GateJson is the machine form.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/watchdog.h"
#include "fuzz/campaign.h"
#include "targets/system_under_test.h"

namespace paradiff {

enum class GateStatus { kPassed, kFailed, kKnown, kSkipped };
const char* Name(GateStatus);

struct GateCase {
  std::string group;     // suite | regression | campaign
  std::string name;      // config file name, or the finding's signature
  std::string path;      // config file (a campaign finding: its config.json)
  std::string expected;  // "pass", a signature, or "invalid"
  std::string got;       // "pass", a signature, or "invalid"
  GateStatus status = GateStatus::kPassed;
  std::string message;  // why it failed, is known or was skipped; the finding's message
  double seconds = 0;
  nlohmann::json report;  // the check's JSON report (oracles/report.h form); null if none
};

struct GateOptions {
  std::string suite_dir;           // required
  std::string regression_dir;      // optional
  double budget_s = 0;             // fuzzing budget (0 = no campaign)
  CampaignOptions campaign;        // workdir (default: a new temporary dir), seed, jobs, exe
  std::set<std::string> baseline;  // known signatures
  std::chrono::milliseconds timeout =
      kDefaultCollectiveTimeout;     // collective watchdog of every suite / corpus check
  std::vector<std::string> oracles;  // oracle selection (suite, corpus and campaign)
  SystemUnderTest system;            // the built-in engine or an external target (--target)
};

struct GateResult {
  std::vector<GateCase> cases;
  bool campaign_ran = false;
  CampaignSummary campaign;
  std::string campaign_workdir;
  int passed = 0, failed = 0, known = 0, skipped = 0;
  double seconds = 0;
  bool ok() const { return failed == 0; }
};

// A baseline file (campaign and gate --baseline): a JSON list of signatures, or an object with a
// "signatures" list (so a previous gate's --json output is a baseline too).
StatusOr<std::set<std::string>> LoadBaseline(const std::string& path);

// Runs the gate; one INFO / ERROR line per case goes to `log`. A missing directory, a malformed
// expectation or bad campaign options are a Status error (exit code 2 in main).
StatusOr<GateResult> RunGate(const GateOptions& opts, std::ostream& log);

// The machine-readable result; "signatures" lists every finding signature the gate saw.
nlohmann::json GateJson(const GateResult& result, const GateOptions& opts);

}  // namespace paradiff
