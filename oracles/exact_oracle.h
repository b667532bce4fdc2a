// The exact-arithmetic oracle: for model.kind = exact_linear (dyadic weights {-1, 0, 1} / 8 and
// data {-1, 0, 1} / 4, squared-error loss), SGD and float32 everywhere, the arithmetic of a step
// can be exact: no product or sum needs more than float32's 24 significand bits. Then every
// reduction order gives the same bits, and the distributed run must equal the float64 truth
// bitwise in every layout. That catches bugs far below rounding level (a gradient averaged over 3
// instead of 4 ranks that happens to be within tolerance, a lost micro-batch of tiny gradients).
//
// Note [Exact regime]: whether a quantity is exact is decided empirically, per quantity, by the
// reference pair: a quantity is "exact" when the float32 reference (same micro-batches, one
// device) equals the float64 truth bitwise. The oracle walks the steps in order and requires
// dist == truth bitwise for every exact quantity, except a parameter / slot whose gradient is not
// exact at that step; it stops after the first step where any gradient, parameter or slot is
// inexact (from there on the runs legitimately differ by rounding). Scalars: the loss is checked
// when exact, the gradient norm never (a float64 square root of a sum in rank order). It is
// skipped when the preconditions fail (kind, SGD, no clipping, fp32 param / compute / reduce /
// accumulate) or no quantity of step 0 is exact. Only step 0 is ever exact (after one update the
// products need more than 24 bits), and only for small models: the gradients (and the SGD
// momentum, a copy of them) of a layer or two of small hidden size, the parameters only where
// lr * gradient is coarse next to the weights (a large power-of-two lr), the loss seldom (its
// float32 sum of squares rounds). tests/unit/exact_oracle_test.cpp keeps a matrix of configs
// inside that regime. Evidence: docs/EVIDENCE.md.
#pragma once

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/oracle.h"

namespace paradiff {

// "" when the static preconditions hold, else the reason the oracle does not apply.
std::string ExactPreconditions(const Config& cfg);

class ExactOracle : public Oracle {
 public:
  const char* name() const override { return "exact"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
