// TrainRankPhase: one rank's part of one phase of a run, the per-rank routine every backend of the
// built-in engine runs on its own ranks (the local backend's threads, kernels/engine.cpp; the mpi
// backend's processes under mpirun, tools/cmd_rank.cpp). A phase is a run's steps [first, last),
// optionally restored from a checkpoint first and saved after (see Note [Checkpointed runs] in
// kernels/engine.cpp); every collective the rank issues goes through a recorded split of `world`,
// so its observations carry the collective log.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/config.h"
#include "kernels/checkpoint.h"
#include "kernels/faults.h"
#include "sut/observations.h"

namespace paradiff {

struct RankPhase {
  int64_t first = 0, last = 0;             // steps [first, last)
  const CheckpointReader* load = nullptr;  // restore this rank's state before the first step
  std::string save_dir;                    // save this rank's shard after the last step ("": no)
};

// Trains the phase into `obs` as it goes (a rank that throws leaves the steps it completed, which
// name the step a failure happened in). Returns, after a save, {"entry": the shard's manifest
// entry, "updates", "scaler"}; null otherwise.
nlohmann::json TrainRankPhase(const Config& cfg, const FaultSet& faults, Communicator& world,
                              const RankPhase& phase, RankObservations& obs);

// DIR/manifest.json from every rank's `saved`, in rank order, with rank 0's optimizer step count
// and loss-scaler state; `step` is the phase's last step.
void WritePhaseManifest(const std::string& dir, const Config& cfg, int64_t step,
                        const std::vector<nlohmann::json>& saved);

}  // namespace paradiff
