// The mirror oracle: where the reference twin mirrors a run's arithmetic operation for operation,
// the run's gradients must equal the twin's bit for bit.
//
// Note [Mirrored arithmetic]: the twin runs the same per-tensor math on the same micro-batches
// with the run's loss multiplier and adds the micro-batch gradients in the run's order and dtypes
// (see Note [Mirrored loss multiplier], see Note [Mirrored reduction order] in reference.cpp).
// Without tensor or pipeline parallelism nothing else happens to a gradient: each rank's backward
// is the twin's backward on the same micro-batch, and the data-parallel sum is elementwise, in rank
// order, in the reduce dtype, whatever ZeRO stage or bucketing moves the elements around (except
// a tied embedding's gradient, whose two contributions the engine adds in its own order). So
// from equal states the gradients are equal, with no rounding slack at all, and a bug below the
// numeric oracle's tolerance (a reduction in a coarser dtype than configured, an average taken in
// another order, an element counted twice in a sum that happens to round alike) still shows. The
// check runs step by step while the run's state (parameters, master weights, optimizer slots)
// equals the twin's bit for bit; the first step whose update rounds differently (a clip
// coefficient from a norm summed in another order) ends it, legitimately. Overflowed steps and
// steps whose skip decisions differ end it too (the numeric oracle judges those).
// Evidence: docs/EVIDENCE.md.
#pragma once

#include <string>

#include "core/config.h"
#include "oracles/oracle.h"

namespace paradiff {

// "" when the layout of every step is one the twin mirrors (tp 1, pp 1), else the reason.
std::string MirrorPreconditions(const Config& cfg);

class MirrorOracle : public Oracle {
 public:
  const char* name() const override { return "mirror"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
