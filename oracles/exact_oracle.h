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
// accumulate) or no quantity of step 0 is exact. Measured (kDyadicScale 1/8, kDyadicData 1/4):
// only step 0 is ever exact (after one update the products need more than 24 bits). Its
// gradients (and the SGD momentum, a copy of them) are exact up to two layers of hidden 32
// (seq_len 8, micro_batch 2, dp 2), not from three layers or hidden 64 on; its parameters are
// exact only when lr * gradient is coarse next to the weights: with one layer, hidden 4-16,
// seq_len 4-8, micro_batch 1-4, dp * accumulation_steps a power of two up to 8 and lr a power of
// two >= 0.5 in most configs, with two layers from lr >= 64; the loss mostly rounds (its float32
// sum of squares). On clean runs of 2048 configs (layers 1-2, hidden 4-32, seq_len 4-8,
// micro_batch 1-2, accumulation 1-2, dp 1-8, ZeRO 0-3, lr 1/16 and 4) the oracle applied to 2040
// and found nothing; tests/unit/exact_oracle_test.cpp keeps a matrix of them.
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
