// RunTarget: one config on an external target (docs/TARGETS.md). Writes the run dir
// (targets/run_dir.h), launches the target's argv (targets/target_file.h) in its own session
// without a shell (core/child_process.h), or hands the run dir to a warm worker of a protocol-2
// target (targets/warm_workers.h), under a watchdog of the target's timeout_s, and reads
// the observations back into an EngineOutcome, so the oracles compare them with the references
// exactly as they compare the built-in engine's.
//
// A failure of the target is a value, never an exception (EngineOutcome.target names the target):
//   failure_kind "hang"  (detail "timeout"): it outlived timeout_s; its session was killed
//   failure_kind "crash" (detail "exit" | "signal" | "exec"): it exited non-zero, died of a
//       signal, or could not be executed; "exit" and "signal" followed by ".STATE" when its log
//       names the exception it died of (targets/crash_state.h)
//   failure_kind "crash" (detail "no_output" | "shape" | "bad_output"): it exited 0 but its
//       observations are missing, of the wrong shape, or malformed
//   failure_kind "unsupported": the config uses a feature the target does not declare (never
//       launched; the metamorphic oracle skips such variants)
// Every failure message names the target, the rank when known, and ends with the tail of its log;
// the run dir of a failed run is kept and named. A config with a checkpoint runs as two launches,
// save and reload (see Note [Checkpointed target runs] in targets/run_dir.h), joined as the
// built-in engine joins its phases; a failure of the second names the reload step.
#pragma once

#include <string>

#include "core/config.h"
#include "sut/outcome.h"
#include "targets/target_file.h"
#include "targets/warm_workers.h"

namespace paradiff {

// Which of a target's run dirs outlive their run. Commands that check many configs unattended
// (campaign, minimize, gate) keep none: a failure quotes its log's tail, and `paradiff run` on its
// config keeps its run dir.
enum class KeepRunDirs {
  kNone,
  kFailed,  // a failed run's, named in its failure (run, replay)
  kAll,     // every run's (run, replay --keep-run-dirs DIR)
};

struct TargetRunOptions {
  std::string work_dir;  // parent of the run dirs; "" = the system temp dir
  KeepRunDirs keep = KeepRunDirs::kNone;
};

// A protocol-2 target runs on `warm`'s workers (required for one; ignored for protocol 1).
EngineOutcome RunTarget(const TargetSpec& t, const Config& cfg, const TargetRunOptions& o,
                        WarmWorkers* warm = nullptr);

}  // namespace paradiff
