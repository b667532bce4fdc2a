// The learning rate of one optimizer step under optimizer.schedule (docs/CONFIG.md, "Learning-rate
// schedules"). A pure function of the config and the count of updates applied before the step:
// the engine, the reference and the update oracle each keep their own count and ask here.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace paradiff {

// The schedule's ratio for the update that follows `applied` applied updates (0 for the first).
// DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR (with a warmup from 0) step their
// iteration after each update, starting from -1, and the first two updates both see ratio 0; this
// is the same function of i = applied - 1.
double LrRatio(const LrScheduleConfig& s, int64_t applied);

// `o` with lr replaced by the rate of the update that follows `applied` applied updates.
OptimizerConfig AtUpdate(const OptimizerConfig& o, int64_t applied);

}  // namespace paradiff
