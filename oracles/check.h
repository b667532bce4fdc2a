// CheckRun: one config end to end. Runs the engine on the local backend and the reference pair
// (cached), assembles the observations, and applies the oracles in order: engine failures
// (collective mismatch, hang, crash), invariants (tiling, replicas), then numerics. Returns the
// verdict, a per-step summary, every comparison, and where the time went.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/numeric_oracle.h"
#include "oracles/reference.h"

namespace paradiff {

struct CheckOptions {
  std::chrono::milliseconds timeout{20000};  // watchdog for every collective wait
  ReferenceCache* cache = nullptr;           // shared reference cache (optional)
};

struct StepRow {
  int64_t step = 0;
  double loss_dist = 0, loss_same = 0, loss_truth = 0;
  double worst_ratio = 0;  // largest error / bound of the step
  std::string worst_where; // kind:tensor of that comparison
};

struct CheckTiming {
  double reference_s = 0, engine_s = 0, compare_s = 0;
};

// What one rank held and did: its memory account after the last step and its collective calls.
struct RankSummary {
  std::map<std::string, int64_t> memory_bytes;  // by category (kernels/observations.h)
  bool memory_grew = false;                     // any category larger after the last step than the first
  std::map<std::string, int64_t> collectives;   // op name -> calls
  std::vector<std::string> first_collectives;   // the first few fingerprints, for the report
};

struct CheckResult {
  Verdict verdict;
  std::vector<RankSummary> ranks;
  std::vector<StepRow> rows;
  std::vector<Comparison> comparisons;
  CheckTiming timing;
  bool reference_cached = false;
};

// `cfg` must be valid (core/validate.h) and supported (kernels/engine.h EngineSupports).
CheckResult CheckRun(const Config& cfg, const CheckOptions& opts);

}  // namespace paradiff
