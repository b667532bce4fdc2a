// The minimizer (`paradiff minimize`, and campaigns after their loop): shrinks a config that shows
// a finding to a smallest one with the same signature, checking every candidate in-process with
// CheckRun and one shared ReferenceCache (configs are tiny). Owns the greedy search and the
// description of each accepted step; the moves themselves are ShrinkCandidates'
// (fuzz/config_domain.h).
//
// Contract (see Note [Greedy 1-minimality]): the result shows exactly the original's signature (a
// candidate that shows another finding, passes, or is invalid / unsupported by this engine build
// is never accepted: no drift to another bug), and, when `complete` is true, no single candidate
// of ShrinkCandidates(result) that is valid and supported keeps that signature.
//
// Note [Greedy 1-minimality]: each round walks ShrinkCandidates(current), most aggressive first,
// and takes the first that keeps the signature; the search ends with a round in which none does.
// CheckRun is deterministic for a config, so a candidate once seen to lose the signature is
// remembered and not checked again when a later round proposes it anew.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "core/watchdog.h"
#include "oracles/check.h"
#include "oracles/reference.h"

namespace paradiff {

struct MinimizeStep {
  std::string change;  // "parallel.dp 4->2, parallel.world 4->2"
  int64_t check = 0;   // 1-based number of the check that accepted it
};

struct MinimizeOptions {
  std::chrono::milliseconds timeout =
      kDefaultCollectiveTimeout;                  // collective watchdog of every check
  double budget_s = 0;                            // wall-time cap of the search (0 = none)
  ReferenceCache* cache = nullptr;                // shared reference cache (optional)
  std::vector<std::string> oracles;               // oracle selection of every check ("" = default)
  EngineRunner run_engine;                        // the system under test (empty = built-in engine)
  std::function<Status(const Config&)> supports;  // what it can run (empty = EngineSupports)
  std::function<void(const Verdict&)> on_original;  // called with the original's verdict (optional)
  std::function<void(const MinimizeStep&)> on_step;  // called for each accepted step (optional)
};

struct MinimizeResult {
  Verdict original;       // the original config's verdict
  std::string signature;  // its signature ("pass" when it shows no finding)
  bool finding = false;   // the original shows a finding (otherwise nothing was minimized)
  Config minimized;       // equals the input when there is no finding
  std::vector<MinimizeStep> steps;
  int64_t checks = 0;     // CheckRun calls, the original's included
  int64_t skipped = 0;    // candidates skipped: invalid or unsupported by this engine build
  bool complete = false;  // the search ended 1-minimal (false: budget ran out first)
  double seconds = 0;
};

// `cfg` must be valid (core/budget.h CheckConfig) and supported (kernels/engine.h EngineSupports).
MinimizeResult Minimize(const Config& cfg, const MinimizeOptions& opts);

// The fields that differ between two configs, as "dotted.field old->new" joined by ", ".
std::string DescribeChange(const Config& from, const Config& to);

}  // namespace paradiff
