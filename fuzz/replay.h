// Replay (`paradiff replay`, the gate, the regression tests): re-checks stored configs in-process
// and classifies each against what was expected of it. Owns the expansion of paths into configs
// (see Note [Replay paths]), the expectation file format, and the outcome classes.
//
// Note [Replay paths]: a PATH is
//   - a config file NAME.json (its expectation: NAME.expect.json beside it, if present);
//   - a finding dir (holds meta.json): config.json and, if present, minimized.json, both expected
//     to show meta.json's signature;
//   - a campaign work dir (holds findings/): every finding dir under findings/;
//   - any other directory: its finding dirs and its *.json configs (not *.expect.json), sorted by
//     name, one level deep (so WORKDIR/findings, WORKDIR/corpus and corpus/regression all work).
//
// Expectation file NAME.expect.json: {"signature": "<signature>" | "pass" | "invalid", ...};
// other keys (e.g. "bug", "note") are for people.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/verdict.h"
#include "oracles/check.h"
#include "targets/system_under_test.h"

namespace paradiff {

inline constexpr char kExpectSuffix[] = ".expect.json";

struct ReplayItem {
  std::string path;      // the config file
  std::string name;      // display name: file name, or <finding dir>/config.json
  std::string expected;  // a signature, "pass", "invalid", or "" (nothing known)
};

enum class ReplayOutcome {
  kSame,       // shows the expected finding signature again
  kDifferent,  // shows another finding than expected (or one where a pass was expected)
  kFails,      // shows a finding; nothing was expected (a plain config)
  kPass,       // shows no finding
  kInvalid,    // cannot be checked: unreadable, invalid, over budget, or unsupported by the engine
};
const char* Name(ReplayOutcome);

struct ReplayResult {
  ReplayItem item;
  ReplayOutcome outcome = ReplayOutcome::kInvalid;
  std::string got;            // the signature shown: a signature, "pass" or "invalid"
  bool matches = false;       // an expectation exists and `got` equals it
  bool unsupported = false;   // invalid only because this engine build cannot run it (yet)
  bool inconclusive = false;  // the check could not decide (a pass by outcome; see Replay)
  Verdict verdict;            // of the check (kPass when invalid)
  std::string message;        // the verdict's message, or why the config is invalid
  double seconds = 0;
  nlohmann::json report;  // ReportJson of the check; null when invalid
};

// Expands PATHs (see Note [Replay paths]); a missing path or a malformed expectation is an error.
StatusOr<std::vector<ReplayItem>> CollectReplayItems(const std::vector<std::string>& paths);

// The expected signature from NAME.expect.json beside `config_path`; "" when there is none.
StatusOr<std::string> ReadExpectation(const std::string& config_path);

// Loads, validates and checks one item; never throws for a bad config (kInvalid).
// `system` decides what is supported (the built-in engine by default); opts.run_engine runs it.
ReplayResult Replay(const ReplayItem& item, const CheckOptions& opts,
                    const SystemUnderTest& system = {});

}  // namespace paradiff
