// CompareBitwise (oracles/bitwise.h): IEEE equality with NaN equal to NaN, elements counted, the
// worst distance in ulps of the held dtype located, whatever the inputs' dtypes and shapes.
#include "oracles/bitwise.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
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

// UlpOf is the spacing of the held dtype at each value: the distance from |x| to the next value
// up, in every dtype, from the subnormals to the largest binade, of any shape and input dtype
// (zero aside: std::frexp gives it the exponent of 0.5).
TEST(UlpOf, IsTheSpacingToTheNextValueUp) {
  const at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(20261205);
  const auto randn = [&] { return at::randn({200}, gen, at::TensorOptions().dtype(at::kDouble)); };
  const at::Tensor x =
      at::cat({randn() * 1e3, randn() * 1e-3,
               at::tensor({1.0, 0.5, 2.0, 1e-40, 6e-8, -3.0, 1e-45, 7.0}, at::kDouble)});
  const std::pair<DType, at::ScalarType> dtypes[] = {{DType::kFp32, at::kFloat},
                                                     {DType::kBf16, at::kBFloat16},
                                                     {DType::kFp16, at::kHalf},
                                                     {DType::kFp64, at::kDouble}};
  for (const auto& [held, st] : dtypes) {
    const at::Tensor all = x.to(st).abs();
    const at::Tensor v = all.index({all.ne(0)});  // 1e-40 is 0 in float16
    // The next value up: one more in the bits of a non-negative finite value.
    at::Tensor up;
    if (st == at::kDouble) {
      up = (v.view(at::kLong) + 1).view(at::kDouble);
    } else if (st == at::kFloat) {
      up = (v.view(at::kInt) + 1).view(at::kFloat);
    } else {
      up = (v.view(at::kShort) + 1).view(st);
    }
    const at::Tensor spacing = up.to(at::kDouble) - v.to(at::kDouble);
    const at::Tensor ulp = UlpOf(v.unsqueeze(1), held);
    EXPECT_EQ(ulp.sizes(), v.unsqueeze(1).sizes());
    EXPECT_EQ(ulp.scalar_type(), at::kDouble);
    EXPECT_TRUE(at::equal(ulp.view(-1), spacing)) << c10::toString(st);
    EXPECT_TRUE(at::equal(UlpOf(-v, held), ulp.view(-1))) << "sign";
  }
}

}  // namespace
}  // namespace paradiff
