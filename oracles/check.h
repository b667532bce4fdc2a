// CheckRun: one config end to end. Asks the validation gate (a config the validator rejects or
// this engine build does not support never starts a rank), runs the engine and then the reference
// pair (cached) under the reduction structure the run declares, assembles the observations,
// compares them numerically, and applies the selected oracles in canonical order
// (oracles/oracle_registry.h); the first finding is the verdict (else the first inconclusive one,
// else pass), and a failed run no oracle claimed is a crash. Returns the verdict, a per-step
// summary, every comparison, what each oracle said, and where the time went.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/budget.h"
#include "core/config.h"
#include "core/verdict.h"
#include "core/watchdog.h"
#include "oracles/numeric_oracle.h"
#include "oracles/oracle.h"
#include "oracles/reference.h"

namespace paradiff {

struct CheckOptions {
  std::chrono::milliseconds timeout =
      kDefaultCollectiveTimeout;    // watchdog for every collective wait
  ReferenceCache* cache = nullptr;  // shared reference cache (optional)
  // Oracle selection (names and sets, oracles/oracle_registry.h); empty = "default". An unknown
  // name makes CheckRun throw std::invalid_argument: resolve user input with ResolveOracleNames.
  std::vector<std::string> oracles;
  ResourceBudget budget;  // the validation gate's budget (and variants')
  // Runs the engine; empty = RunEngine(cfg, timeout) (the local backend). Tests plant bugs here.
  EngineRunner run_engine;
  // Profiling (bench/time_split.cpp): called on the checking thread as each phase starts, with
  // "engine", "reference", "assemble", "numeric", then each oracle's name; empty = not called.
  std::function<void(const std::string& phase)> on_phase;
};

struct StepRow {
  int64_t step = 0;
  double loss_dist = 0, loss_same = 0, loss_truth = 0;
  double worst_ratio = 0;   // largest error / bound of the step
  std::string worst_where;  // kind:tensor of that comparison
  // The numeric comparison restarted from the run's own state before this step (see Note [Restarted
  // comparison] in numeric_oracle.cpp); loss_same / loss_truth are the restarted pair's.
  bool restarted = false;
};

struct CheckTiming {
  double reference_s = 0, engine_s = 0, compare_s = 0;
};

// What one rank held and did: its memory account after the last step and its collective calls.
struct RankSummary {
  std::map<std::string, int64_t> memory_bytes;  // by category (sut/observations.h)
  bool memory_grew = false;  // any category larger after the last step than the first
  std::map<std::string, int64_t> collectives;  // op name -> calls
  std::vector<std::string> first_collectives;  // the first few fingerprints, for the report
};

// What one oracle said about the run.
enum class OracleStatus { kPass, kFinding, kSkipped, kInconclusive };
inline constexpr Spelling<OracleStatus> kOracleStatusNames[] = {
    {"pass", OracleStatus::kPass},
    {"finding", OracleStatus::kFinding},
    {"skipped", OracleStatus::kSkipped},
    {"inconclusive", OracleStatus::kInconclusive}};
inline const char* Name(OracleStatus s) { return NameIn(kOracleStatusNames, s); }

struct OracleOutcome {
  std::string name;
  OracleStatus status = OracleStatus::kPass;
  std::string note;  // the skip reason, the finding's signature, or why it is inconclusive
  double seconds = 0;
};

// What the run did, for a campaign to steer by (oracles/behaviour.h).
struct Behaviour {
  std::vector<std::string> features;  // sorted, unique
  double margin = 0;                  // the largest error / bound over every step's comparisons
};

struct CheckResult {
  Verdict verdict;
  std::vector<RankSummary> ranks;
  std::vector<StepRow> rows;
  std::vector<Comparison> comparisons;
  std::vector<OracleOutcome> oracles;  // in the order applied; stops after the first finding
  CheckTiming timing;
  bool reference_cached = false;
  bool rejected = false;  // the validation gate refused the config; nothing ran (not a finding)
  Behaviour behaviour;
};

// `cfg` should be valid (core/validate.h) and supported (kernels/engine.h EngineSupports); when
// "validation" is selected, one that is not comes back rejected without running anything.
CheckResult CheckRun(const Config& cfg, const CheckOptions& opts);

}  // namespace paradiff
