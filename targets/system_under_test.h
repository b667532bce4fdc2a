// SystemUnderTest: what a check runs, the built-in engine or an external target (docs/TARGETS.md),
// with the one question every driver asks first (can it run this config?) and the runner the
// oracles call. Campaigns, the minimizer, replay and the gate take one of these.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/reload_support.h"
#include "core/status.h"
#include "oracles/oracle.h"
#include "targets/target_file.h"
#include "targets/target_runner.h"
#include "targets/warm_workers.h"

namespace paradiff {

// What a system declares about the configs it takes beyond Supports, for the generator to draw
// within (fuzz/campaign.cpp) and the campaign's watchdog. The built-in engine declares no limit.
struct SystemLimits {
  int64_t max_world = std::numeric_limits<int64_t>::max();  // the largest world it runs
  std::map<std::string, TargetOption> options;  // its own settings, their values and rules
  ReloadSupport reload;                         // the reload layouts its checkpoints go into
  std::vector<TargetPrecision> precisions;      // the precisions it takes (empty: any)
  std::vector<std::string> parallel;            // the parallel dimensions it runs (empty: any)
  int64_t run_timeout_s = 0;                    // its own watchdog of one run (0: none)
  bool shard_groups = false;                    // it takes zero.shard_group other than 0
};

struct SystemUnderTest {
  std::shared_ptr<const TargetSpec> target;  // null: the built-in engine
  // A protocol-2 target's warm workers, shared by every runner of this system (and its copies);
  // null otherwise.
  std::shared_ptr<WarmWorkers> warm;
  TargetRunOptions run_options;  // where a target's run dirs go, and which outlive their run

  // EngineSupports for the built-in engine, TargetSupports for a target.
  Status Supports(const Config& cfg) const;
  // Empty for the built-in engine (CheckRun's default), RunTarget bound to the target (and its
  // warm workers) otherwise.
  EngineRunner Runner() const;
  SystemLimits Limits() const;
  // "engine" or "target NAME (FILE)".
  std::string Describe() const;
};

// The system named by a --target FILE argument ("" = the built-in engine), its run dirs made and
// kept as `run_options` says (by default in the system temp dir, none kept).
StatusOr<SystemUnderTest> LoadSystemUnderTest(const std::string& target_file,
                                              const TargetRunOptions& run_options = {});
// How `run` and `replay` keep run dirs: a failed run's in the system temp dir or, given
// --keep-run-dirs DIR, every run's in DIR.
TargetRunOptions KeepingRunDirs(const std::string& keep_run_dirs);

}  // namespace paradiff
