// Bitwise comparison for the oracles that require equality (determinism, metamorphic ZeRO stage
// relation, exact arithmetic, replicas): which elements differ, and by how many units in the last
// place of the dtype the values were held in, so a finding reads "3 ulps" rather than "1e-9".
// Equality is IEEE equality on the values (so -0.0 == 0.0) with NaN equal to NaN: two runs that
// both produce NaN at an element agree there; a NaN against a number is an infinite distance.
// The error is the worst distance in ulps and the bound kDiscreteBound (see Note [Discrete
// bounds]).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/quantities.h"

namespace paradiff {

struct BitwiseDiff {
  int64_t count = 0;   // elements that differ
  int64_t index = -1;  // the element with the largest distance
  double expected = 0, actual = 0;
  double ulps = 0;  // its distance in ulps of `held` (inf when one side is NaN / inf)
  bool equal() const { return count == 0; }
};

// TallyBitwise for values that are not IEEE-equal: NaN against NaN still counts as equal.
void TallyUnequal(BitwiseDiff& d, int64_t i, double actual, double expected, DType held);

// Counts element i into d when `actual` and `expected` differ (IEEE equality, NaN equal to NaN),
// keeping the first of the largest distances: CompareBitwise's step, for callers with their own
// loop over the values. Inline: the equal elements, nearly all of them, cost one comparison.
inline void TallyBitwise(BitwiseDiff& d, int64_t i, double actual, double expected, DType held) {
  if (actual != expected) TallyUnequal(d, i, actual, expected, held);
}

// Puts d's worst element into `where`: its index (`offset` + d.index), expected and actual values,
// its distance in ulps against kDiscreteBound.
void PlaceBitwise(Localization& where, const BitwiseDiff& d, int64_t offset = 0);

// Both flat float64 tensors of equal size (values held in `held` by the run).
BitwiseDiff CompareBitwise(const at::Tensor& actual, const at::Tensor& expected, DType held);

// Distance of two values in units in the last place of `held` at the larger magnitude.
double UlpDistance(double a, double b, DType held);

// Significand bits of `held`, the implicit one included (bf16 8, fp16 11, fp32 24, fp64 53).
int PrecisionBits(DType held);

// One ulp of `held` at |x|, elementwise (the spacing just above |x|; subnormals alike): the unit
// UlpDistance measures in.
at::Tensor UlpOf(const at::Tensor& x, DType held);

using QuantityValue = std::function<at::Tensor(const Quantity&)>;

// Walks QuantitiesInOrder(cfg) (those `include` accepts; all when it is empty) and returns a
// kMismatch verdict of `oracle` with `detail` for the first quantity where `actual` differs
// bitwise from `expected`, or kPass. `what` names the two sides in the message ("the second run"
// vs "the first run").
Verdict FirstBitwiseDifference(const Config& cfg, const std::string& oracle,
                               const std::string& detail, const QuantityValue& actual,
                               const QuantityValue& expected, const std::string& actual_name,
                               const std::string& expected_name,
                               const std::function<bool(const Quantity&)>& include = {});

// The message and localization of a bitwise difference of quantity `q` (used by the walkers).
Verdict BitwiseFinding(const Config& cfg, const std::string& oracle, const std::string& detail,
                       const Quantity& q, const BitwiseDiff& d, const std::string& actual_name,
                       const std::string& expected_name);

}  // namespace paradiff
