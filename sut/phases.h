// The phases of a checkpointed run (checkpoint.save_at > 0), the same for every system under test:
// train to save_at in the config's layout, save, reload into checkpoint.reload's layout and
// continue to `steps` (see Note [Checkpointed runs] in kernels/engine.cpp). The built-in engine on
// either backend and the external-target runner (targets/target_runner.cpp) run the two phases
// and join their observations with these.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/status.h"
#include "sut/observations.h"

namespace paradiff {

// The rules of a checkpointed config's reload that bind every system, the built-in engine and
// external targets alike (their reload phase re-divides the same micro-batches): the reload dp
// divides the step's micro-batches, and the reload layout is itself a valid config.
Status ReloadSupports(const Config& cfg);

// The config of the second phase of a checkpointed run: the reload layout, nothing else changed
// (virtual stages / interleaving / explicit partitions reset when pp changes; sp off when tp=1).
Config ReloadPhaseConfig(const Config& cfg);
// The layout that ran `step`: the config itself, or its reload phase from checkpoint.save_at on.
Config LayoutAtStep(const Config& cfg, int64_t step);
// The first step of the phase `step` belongs to (0, or checkpoint.save_at).
int64_t PhaseFirstStep(const Config& cfg, int64_t step);
// A checkpointed run's observations per rank index: phase one's steps [0, split), then phase
// two's [split, steps); a rank missing from a phase gets empty placeholder steps carrying rank 0's
// overflow decision. Memory and collective marks are joined where the phases recorded them.
Observations JoinPhases(const Observations& a, const Observations& b, int64_t split, int64_t steps);

}  // namespace paradiff
