// CopyAsDouble (oracles/piece_values.h) gives exactly what .to(at::kDouble) gives, for every dtype
// a rank reports, contiguous or not, including inf, nan and subnormals.
#include "oracles/piece_values.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace paradiff {
namespace {

void ExpectSameAsTo(const at::Tensor& t) {
  std::vector<double> got(static_cast<size_t>(t.numel()), -7.0);
  CopyAsDouble(t, got.data());
  at::Tensor want = t.to(at::kDouble).contiguous().reshape({-1});
  ASSERT_EQ(want.numel(), static_cast<int64_t>(got.size()));
  EXPECT_EQ(std::memcmp(got.data(), want.data_ptr<double>(), got.size() * sizeof(double)), 0)
      << "dtype " << t.scalar_type() << " contiguous " << t.is_contiguous();
}

TEST(PieceValues, EveryReportedDtypeConvertsExactly) {
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor base = at::tensor({0.0, -0.0, 1.0 / 3.0, -2.5e-8, 6.1e-5, 70000.0, 1e-40, inf, -inf,
                                std::nan(""), 3.0e38, -1.0},
                               at::kDouble);
  for (auto dt : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf}) {
    at::Tensor t = base.to(dt);
    ExpectSameAsTo(t);
    ExpectSameAsTo(t.view({3, 4}).t());  // not contiguous
    ExpectSameAsTo(t.narrow(0, 2, 5));   // an interior run
  }
  ExpectSameAsTo(at::arange(5, at::kLong));  // any other dtype takes the operator path
}

TEST(PieceValues, EmptyWritesNothing) {
  double sentinel = 42;
  CopyAsDouble(at::empty({0}, at::kFloat), &sentinel);
  EXPECT_EQ(sentinel, 42);
}

}  // namespace
}  // namespace paradiff
