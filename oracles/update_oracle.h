// The update oracle: every optimizer step of a run must follow, to float32 rounding, from the
// run's own reported inputs: its gradient (unscaled, before clipping), its gradient norm (which
// sets the clip coefficient), its skip decision, and its own state of the step before (parameters,
// master weights, optimizer slots; at step 0 the generated initial state). The oracle recomputes
// each step in float64 with its own implementation of the optimizer (docs/CONFIG.md semantics;
// deliberately not kernels/optim.cpp, so a bug there shows too) and compares elementwise.
//
// Why: the numeric oracle compares against the reference, so its bound must absorb everything the
// precision does to the gradients; with 16-bit compute that is ~1.6e-2 of a tensor's norm, and an
// optimizer-side bug below it (decoupled weight decay lost on the master weights, master weights
// rebuilt from 16-bit parameters on a reload, a clip coefficient or an Adam step count slightly
// off) hides in it. Taking the run's own gradient as given removes that noise: what remains is
// float32 arithmetic on float32 inputs.
//
// Note [Update bound]: each element of the update is a handful of float32 operations on float32
// inputs; each rounds with u = 2^-24 relative to its result, so the result is off by at most a few
// u times the sum of the magnitudes of the terms it was built from (running error analysis,
// Higham 3.3). Beside each expected value the oracle carries that magnitude `mag` (|β1 m| +
// |(1 - β1) g| for Adam's first moment, |p| + |lr m / denom| for a parameter, ...) and allows
// kUpdateRoundings u mag, kUpdateRoundings = 16 (an Adam parameter takes about 8 roundings), plus
// as many float32 subnormal spacings (2^-149: below 2^-126 rounding is absolute). A
// clipped step adds the relative error of the reported norm at its declared precision (see Note
// [Reported norm precision] in oracles/tolerance.cpp) to every gradient term. A parameter held
// in 16 bits is a float32 result rounded once more: one ulp of its dtype on top (the float64
// expectation, rounded, can land on the other side of a tie). With master weights the 16-bit
// parameters must be the run's own master weights rounded, within that ulp.
//
// Skipped steps must leave the state bit for bit unchanged; Adam's step count is the number of
// steps the run applied (skips do not count). Elements whose expectation is not finite (a run
// whose state already overflowed) are not judged; a non-finite value where the expectation is
// finite is an infinite error. Skipped as a whole when the run does not report its gradients or
// its optimizer state (external targets, docs/TARGETS.md "reports").
#pragma once

#include "oracles/oracle.h"

namespace paradiff {

class UpdateOracle : public Oracle {
 public:
  const char* name() const override { return "update"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
