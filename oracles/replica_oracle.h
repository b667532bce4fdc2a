// The replica oracle (replica consistency): wherever several ranks report the same element of the
// same logical tensor at the same step (parameters replicated across dp below ZeRO-3, reduced
// gradients below ZeRO-2, replicated state across tp ranks, tied copies on several pipeline
// stages), the copies must be bitwise identical: a replica that drifted is a desynchronized model
// even when its average looks right. Comparison as oracles/bitwise.h (IEEE equality, NaN == NaN);
// the error is the distance in ulps of the dtype the kind is held in.
#pragma once

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/oracle.h"
#include "sut/observations.h"

namespace paradiff {

// kPass, or the first kInvariant (oracle "replica") in step order, then rank order: names the two
// ranks (rank = the later one, other_rank = the first holder), the tensor, the index and both
// values. Pieces outside their tensor are left to the tiling oracle.
Verdict CheckReplicas(const Config& cfg, const Observations& obs);

class ReplicaOracle : public Oracle {
 public:
  const char* name() const override { return "replica"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
