// CompareBitwise (oracles/bitwise.h): IEEE equality with NaN equal to NaN, elements counted, the
// worst distance in ulps of the held dtype located, whatever the inputs' dtypes and shapes.
#include "oracles/bitwise.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace paradiff {
namespace {

TEST(CompareBitwise, CountsLocatesAndMeasuresInUlps) {
  const float one_up = std::nextafter(1.0f, 2.0f);
  // float32 against float64, 2 x 4: -0 equals +0, NaN equals NaN, two elements differ.
  const at::Tensor actual =
      at::tensor({1.0f, -0.0f, NAN, 3.0f, one_up, 2.0f, 5.0f, NAN}).view({2, 4});
  const at::Tensor expected =
      at::tensor({1.0, 0.0, NAN, 3.0, 1.0, 2.0, 5.0, 7.0}, at::kDouble).view({2, 4});
  BitwiseDiff d = CompareBitwise(actual, expected, DType::kFp32);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.index, 7);  // the NaN against 7 is the worst: an infinite distance
  EXPECT_TRUE(std::isinf(d.ulps));
  EXPECT_EQ(d.expected, 7.0);
  EXPECT_TRUE(std::isnan(d.actual));

  // Without the NaN, the one-ulp element at index 4 is the worst (the first of equal ones).
  const at::Tensor finite = at::tensor({1.0f, one_up, one_up, 3.0f});
  d = CompareBitwise(finite, at::tensor({1.0, 1.0, 1.0, 3.0}, at::kDouble), DType::kFp32);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.ulps, 1.0);
  EXPECT_EQ(d.actual, static_cast<double>(one_up));
  // The same difference is 2^-16 of a bf16 ulp.
  EXPECT_EQ(
      CompareBitwise(finite, at::tensor({1.0, 1.0, 1.0, 3.0}, at::kDouble), DType::kBf16).ulps,
      std::ldexp(1.0, -16));

  EXPECT_TRUE(CompareBitwise(expected, expected.clone(), DType::kFp64).equal());
  // A transposed (non-contiguous) view compares by its logical order.
  const at::Tensor m = at::tensor({1.0, 2.0, 3.0, 4.0}, at::kDouble).view({2, 2});
  d = CompareBitwise(m.t(), at::tensor({1.0, 3.0, 2.0, 5.0}, at::kDouble), DType::kFp64);
  EXPECT_EQ(d.count, 1);
  EXPECT_EQ(d.index, 3);

  d = CompareBitwise(at::zeros({3}), at::zeros({4}, at::kDouble), DType::kFp32);
  EXPECT_EQ(d.count, 4);
  EXPECT_TRUE(std::isinf(d.ulps));
}

}  // namespace
}  // namespace paradiff
