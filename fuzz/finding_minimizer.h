// Minimization of a campaign's stored findings, run by RunCampaign after its loop ends (never
// inside it: the loop must not block, and torch runs in workers during it). Owns the two files it
// adds to a finding dir (fuzz/workdir.h):
//
//   findings/<sig>/minimized.json   the minimized config (`paradiff run` reproduces the signature)
//   findings/<sig>/minimize.json    the outcome: {"status": "minimized" | "not-reproduced" |
//                                   "skipped", "reason", "signature", "steps": [...], "checks",
//                                   "complete", "seconds", "budget_s"}
//
// Every finding dir without minimize.json is handled once (so a resumed campaign minimizes what a
// killed one recorded); minimized.json is written before minimize.json, both atomically. Crash and
// hang findings of the worker oracle (the worker process died or timed out) are not reproduced
// in-process: they are marked "skipped" with that reason, and reproduced with `paradiff run`.
#pragma once

#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/spelling.h"
#include "core/watchdog.h"
#include "fuzz/workdir.h"

namespace paradiff {

// minimize.json's "status".
enum class MinimizeStatus { kMinimized, kNotReproduced, kSkipped };
inline constexpr Spelling<MinimizeStatus> kMinimizeStatusNames[] = {
    {"minimized", MinimizeStatus::kMinimized},
    {"not-reproduced", MinimizeStatus::kNotReproduced},
    {"skipped", MinimizeStatus::kSkipped}};
inline const char* Name(MinimizeStatus s) { return NameIn(kMinimizeStatusNames, s); }

struct FindingMinimizeOptions {
  double budget_s = 20;                                    // wall-time cap per finding (> 0)
  int64_t timeout_ms = kDefaultCollectiveTimeout.count();  // collective watchdog of every check
  std::vector<std::string> oracles;                        // the campaign's oracle selection
  std::string target;           // the campaign's external target file ("" = built-in engine)
  std::set<std::string> known;  // signatures not to minimize (the campaign's baseline)
};

// Returns the number of findings minimized. INFO / WARNING lines go to `log`.
int MinimizeStoredFindings(const WorkDir& wd, const FindingMinimizeOptions& opts,
                           std::ostream& log);

}  // namespace paradiff
