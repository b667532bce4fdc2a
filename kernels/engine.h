// The engine entry point: trains a config on a communicator backend and returns what every rank
// observed. A failure of the target (ranks disagreeing on a collective, a hang, an exception) is
// a value in EngineOutcome, never an exception out of RunEngine.
#pragma once

#include <chrono>
#include <string>

#include "core/config.h"
#include "core/status.h"
#include "core/watchdog.h"
#include "sut/outcome.h"
#include "sut/phases.h"

namespace paradiff {

// Which valid configs this build of the engine can run; the rest get a message naming the field.
// Includes ReloadSupports.
Status EngineSupports(const Config& cfg);
// Why the engine does not run cfg's zero.shard_group (it shards over every dp rank), "" when 0.
// Not part of EngineSupports, whose rules bind every system: shard groups are a target's layout,
// which the reference does not depend on.
std::string EngineShardGroupRefusal(const Config& cfg);
struct EngineOptions {
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;  // bounds every collective wait
  // Keep the checkpoint here (written after checkpoint.save_at steps, or after the last step when
  // save_at is 0); empty: a temporary directory, removed after the run.
  std::string checkpoint_dir;
};

// Runs `cfg` on its backend (local: ranks as threads; mpi: processes under mpirun, one job per
// phase, kernels/engine_mpi.h). With checkpoint.save_at > 0: trains to save_at, saves, reloads
// into the checkpoint.reload layout and continues (see Note [Checkpointed runs]).
EngineOutcome RunEngine(const Config& cfg, const EngineOptions& opts);
EngineOutcome RunEngine(const Config& cfg, std::chrono::milliseconds timeout);

}  // namespace paradiff
