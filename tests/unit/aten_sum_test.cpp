// kernels/aten_sum.h (see Note [Sums in ATen's order]): SumOfSquares gives the bits of
// `t.pow(2).sum()` for every length up to ATen's serial limit, on values whose sums round apart in
// any other order, without an operator call; what it cannot do by hand still gets ATen's answer.
#include "kernels/aten_sum.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/numerics.h"
#include "tests/unit/operator_calls.h"

namespace paradiff {
namespace {

using testing::OperatorCalls;

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

double AtenSumOfSquares(const at::Tensor& t) { return ReadScalar(t.pow(2).sum()); }

// Gaussian values times 2^e, e uniform in [-spread, spread]. Squares of similar magnitude (a small
// spread) round apart in every other order of addition, so a wrong cascade, lane count or tail
// order shows; a wide spread leaves the sum to its largest terms.
at::Tensor Values(int64_t n, int spread) {
  at::Tensor v = at::randn({n}, at::kDouble);
  if (spread > 0) v = v * at::pow(2.0, at::randint(-spread, spread + 1, {n}, at::kDouble));
  return v.contiguous();
}

TEST(AtenSum, EveryLengthUpToFourThousandHasAtensBits) {
  at::manual_seed(20261206);
  for (int64_t n = 0; n <= 4096; ++n) {
    const at::Tensor t = Values(n, n % 2 == 0 ? 0 : 3);
    ASSERT_EQ(Bits(SumOfSquares(t)), Bits(AtenSumOfSquares(t))) << "length " << n;
  }
}

TEST(AtenSum, LongTensorsUpToTheSerialLimitHaveAtensBits) {
  at::manual_seed(7);
  // Around the cascade's level boundaries (16, 256, 4096 four-vector blocks) and the limit.
  for (int64_t n : {16383, 16384, 16385, 16447, 20000, 32000, 32767}) {
    const at::Tensor t = Values(n, 2);
    ASSERT_EQ(Bits(SumOfSquares(t)), Bits(AtenSumOfSquares(t))) << "length " << n;
  }
}

TEST(AtenSum, NoOperatorCallOnAContiguousFloat64Tensor) {
  const at::Tensor t = Values(1000, 10);
  (void)SumOfSquares(t);  // the first call probes ATen's lanes
  double got = 0;
  EXPECT_EQ(OperatorCalls([&] { got = SumOfSquares(t); }), 0);
  EXPECT_EQ(Bits(got), Bits(AtenSumOfSquares(t)));
}

TEST(AtenSum, OtherTensorsGoThroughTheOperators) {
  const at::Tensor t = Values(4000, 10);
  const at::Tensor strided = t.slice(0, 0, 4000, 2);  // not contiguous
  EXPECT_GT(OperatorCalls([&] { (void)SumOfSquares(strided); }), 0);
  EXPECT_EQ(Bits(SumOfSquares(strided)), Bits(AtenSumOfSquares(strided)));
  const at::Tensor f32 = t.to(at::kFloat);
  EXPECT_EQ(Bits(SumOfSquares(f32)), Bits(AtenSumOfSquares(f32)));
  const at::Tensor big = Values(40000, 10);  // past ATen's serial limit
  EXPECT_EQ(Bits(SumOfSquares(big)), Bits(AtenSumOfSquares(big)));
}

// The cascade is what makes the bits: adding the squares in element order does not give them
// (the check above would fail for a plain loop), and the lane count matters.
TEST(AtenSum, ElementOrderAndTheOtherLaneCountRoundApart) {
  at::manual_seed(11);
  const at::Tensor t = Values(3000, 0);
  const double* x = t.data_ptr<double>();
  double plain = 0;
  for (int64_t i = 0; i < t.numel(); ++i) plain += x[i] * x[i];
  const double aten = AtenSumOfSquares(t);
  EXPECT_NE(Bits(plain), Bits(aten));
  EXPECT_NE(Bits(CascadeSumOfSquares(x, t.numel(), 4)), Bits(CascadeSumOfSquares(x, t.numel(), 8)));
}

TEST(AtenSum, NonFiniteValuesPropagate) {
  at::Tensor t = Values(100, 0);
  t[37] = INFINITY;
  EXPECT_TRUE(std::isinf(SumOfSquares(t)));
  t[38] = NAN;
  EXPECT_TRUE(std::isnan(SumOfSquares(t)));
}

}  // namespace
}  // namespace paradiff
