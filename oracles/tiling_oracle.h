// The tiling oracle (partition coverage): at every step, every element of every logical tensor a
// run must report (gradients, parameters, master weights, optimizer slots) is held by the expected
// number of ranks, and every reported piece lies inside a known tensor. The expected number is
// exact in every layout (see Note [Expected holders]). A rank that reported fewer steps than
// configured is a finding too.
//
// Note [Padding is not observable]: the engine reports pieces of logical tensors only
// (sut/observations.h); the alignment and dp padding of its flat buffers never appears in an
// observation, so "padding is zero and untouched" cannot be checked here. The memory oracle checks
// the padding's size instead (oracles/memory_oracle.h): each rank's "padding" bytes must equal the
// analytical padding of its held range, so padding that grows, shrinks or shifts into a shard is
// caught; a value written into padding would need a padding observation from kernels/.
#pragma once

#include <string>

#include "core/config.h"
#include "core/model_spec.h"
#include "core/verdict.h"
#include "oracles/oracle.h"
#include "sut/observations.h"

namespace paradiff {

// How many ranks must hold each element of `kind` (grad, param, master, a slot) of parameter `p`.
//
// Note [Expected holders]: the product of three factors. Data parallel with ZeRO: parameters are
// replicated on all dp ranks up to stage 2 and partitioned at stage 3; reduced gradients are
// replicated at stages 0 and 1 and partitioned from stage 2; master weights and optimizer slots are
// replicated at stage 0 and partitioned from stage 1 (a system may declare earlier stages:
// Reporting::partitioned_from). Tensor and pipeline parallel: the tp and pp
// holders of oracles/layout_expectation.h (split tensors 1, kv heads shared by tp / kv_heads ranks,
// replicated tensors tp; a tied embedding on two stages). Partitioned means exactly one holder: a
// shard overlap (two ranks updating the same element) is as much a bug as a gap.
// `from`: the stages from which the system partitions each kind (ZeRO's own by default).
int64_t ExpectedHolders(const Config& cfg, const std::string& kind, const ParamSpec& p,
                        const Reporting::PartitionedFrom& from = {});

// kPass, or the first kInvariant (oracle "tiling") in localization order: step, then kind
// (ExpectedKinds order), then tensor (model order). Out-of-bounds pieces come first in a step.
Verdict CheckTiling(const Config& cfg, const Observations& obs);

class TilingOracle : public Oracle {
 public:
  const char* name() const override { return "tiling"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
