// BehaviourOf: what one check's run did, as a set of short features a campaign can steer by (see
// Note [Behaviour feedback] in fuzz/feedback.h). Features are coarse (counts bucketed) so that a
// new one means a run reached a state no earlier run had, not that a number moved.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "oracles/check.h"
#include "sut/outcome.h"

namespace paradiff {

// The loss scaler's events as the run reported them (every rank agrees, else the assembly's
// finding came first), its numeric margins and restarts, each oracle's inconclusive or skip
// reason class, and the collectives it issued.
Behaviour BehaviourOf(const Config& cfg, const EngineOutcome& eng, const CheckResult& res);

// The loss-scale features of one run's per-step scales and skip flags (one rank's view):
// "scale.overflow_after_clean=K" for each overflow, K the clean steps since the scale last moved
// or overflowed (K capped at 3); growth / backoff / longest skip streak counts (capped at 3);
// "scale.skip_held" for an overflow the scale did not back off at (hysteresis).
std::vector<std::string> LossScaleFeatures(const std::vector<RankStep>& steps);

}  // namespace paradiff
