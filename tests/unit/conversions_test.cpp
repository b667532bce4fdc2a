// kernels/numerics.h's conversions by hand (Convert, AsDType, RoundThrough; see Note
// [Conversions by hand]) must give `to`'s bits: every bf16 and fp16 value, millions of float32
// bit patterns (subnormals, rounding ties, overflow and infinities among them), float64 values on
// and around float32's ties, and NaN; and on a contiguous tensor that needs no gradient, no call
// through the dispatcher.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/numerics.h"
#include "tests/unit/operator_calls.h"

namespace paradiff {
namespace {

using testing::OperatorCalls;

// Bitwise equality, dtype and shape included.
void ExpectSameBits(const at::Tensor& ours, const at::Tensor& aten, const char* what) {
  ASSERT_EQ(ours.scalar_type(), aten.scalar_type()) << what;
  ASSERT_EQ(ours.sizes(), aten.sizes()) << what;
  ASSERT_TRUE(ours.is_contiguous() && aten.is_contiguous()) << what;
  const size_t bytes = static_cast<size_t>(ours.numel()) * ours.element_size();
  if (std::memcmp(ours.data_ptr(), aten.data_ptr(), bytes) == 0) return;
  const at::Tensor differ = ours.view(at::kByte).ne(aten.view(at::kByte)).nonzero();
  ADD_FAILURE() << what << ": the bits differ from to()'s, first at byte "
                << differ[0].item<int64_t>();
}

// Every 16-bit pattern as a tensor of `dtype`, NaNs left out (they take `to` itself).
at::Tensor All16BitValues(at::ScalarType dtype) {
  at::Tensor bits = at::arange(0, 65536, at::kInt).to(at::kShort);
  at::Tensor values = bits.view(dtype);
  return values.index({values.isnan().logical_not()}).contiguous();
}

// Float32 bit patterns: every 211th (about 20 million), the largest and smallest, the subnormals'
// first thousand, and around every fp16 / bf16 rounding tie in [2^-26, 2^17) (a tie, and the
// patterns one below and one above it).
at::Tensor ManyFloat32Values() {
  std::vector<uint32_t> bits;
  for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 211) bits.push_back(static_cast<uint32_t>(b));
  for (uint32_t b = 0; b < 1000; ++b) bits.push_back(b);
  for (uint32_t b : {0x7F7FFFFFu, 0x7F800000u, 0x00800000u, 0x477FE000u, 0x477FF000u, 0x477FEFFFu})
    bits.push_back(b);
  for (uint32_t exponent = 101; exponent < 144; ++exponent)
    for (uint32_t mantissa = 0; mantissa < (1u << 10); mantissa += 7)
      for (uint32_t tie : {1u << 12, 1u << 15})  // fp16 keeps 10 bits, bf16 7
        for (int32_t d : {-1, 0, 1}) bits.push_back((exponent << 23 | mantissa << 13) + tie + d);
  const size_t n = bits.size();
  std::vector<uint32_t> both(2 * n);
  for (size_t i = 0; i < n; ++i) both[i] = bits[i], both[n + i] = bits[i] | 0x80000000u;
  at::Tensor out = at::empty({static_cast<int64_t>(both.size())}, at::kInt);
  std::memcpy(out.data_ptr(), both.data(), both.size() * sizeof(uint32_t));
  at::Tensor values = out.view(at::kFloat);
  return values.index({values.isnan().logical_not()}).contiguous();
}

// Float64 values: the float32 values above, the midpoints between neighbours and a float64 ulp to
// either side of them, and values past float32's range.
at::Tensor ManyFloat64Values() {
  const at::Tensor f = ManyFloat32Values().narrow(0, 0, 2'000'000);
  const at::Tensor up = at::full({1}, std::numeric_limits<float>::infinity(), at::kFloat);
  const at::Tensor mid = (f.to(at::kDouble) + f.nextafter(up).to(at::kDouble)) * 0.5;
  const at::Tensor inf = at::full({1}, std::numeric_limits<double>::infinity(), at::kDouble);
  const at::Tensor beyond = at::tensor({1e39, -1e39, 1e-50, -1e-50, 3.4028235677973366e38});
  return at::cat({f.to(at::kDouble), mid, mid.nextafter(inf), mid.nextafter(-inf),
                  beyond.to(at::kDouble)})
      .contiguous();
}

TEST(Conversions, ConvertIsToBitForBit) {
  const at::Tensor bf16 = All16BitValues(at::kBFloat16), fp16 = All16BitValues(at::kHalf);
  const at::Tensor f32 = ManyFloat32Values(), f64 = ManyFloat64Values();
  struct Pair {
    at::Tensor from;
    at::ScalarType to;
    const char* what;
  };
  for (const Pair& p :
       {Pair{bf16, at::kFloat, "bf16 -> float32"}, Pair{fp16, at::kFloat, "fp16 -> float32"},
        Pair{bf16, at::kDouble, "bf16 -> float64"}, Pair{fp16, at::kDouble, "fp16 -> float64"},
        Pair{f32, at::kDouble, "float32 -> float64"}, Pair{f32, at::kBFloat16, "float32 -> bf16"},
        Pair{f32, at::kHalf, "float32 -> fp16"}, Pair{f64, at::kFloat, "float64 -> float32"}}) {
    at::Tensor ours;
    EXPECT_EQ(OperatorCalls([&] { ours = AsDType(p.from, p.to); }), 0) << p.what;
    ExpectSameBits(ours, p.from.to(p.to), p.what);
  }
  for (at::ScalarType narrow : {at::kHalf, at::kBFloat16}) {
    at::Tensor ours;
    EXPECT_EQ(OperatorCalls([&] { ours = RoundThrough(f32, narrow); }), 0);
    ExpectSameBits(ours, f32.to(narrow).to(at::kFloat), "float32 -> 16 bits -> float32");
  }
}

// A NaN, a gradient to record, strides or a pair without a loop: `to` itself, the same result.
TEST(Conversions, EverythingElseGoesThroughTo) {
  at::Tensor x = at::arange(12, at::kFloat).div(7).view({3, 4});
  x[1][2] = std::numeric_limits<float>::quiet_NaN();
  x[2][0] = -std::numeric_limits<float>::quiet_NaN();
  for (at::ScalarType d : {at::kBFloat16, at::kHalf, at::kDouble}) {
    ExpectSameBits(Convert(x, d), x.to(d), "with NaN");
    ExpectSameBits(RoundThrough(x, at::kHalf), x.to(at::kHalf).to(at::kFloat), "round, NaN");
    const at::Tensor strided = x.t();
    EXPECT_TRUE(at::equal(Convert(strided, d).to(at::kFloat).nan_to_num(),
                          strided.to(d).to(at::kFloat).nan_to_num()));
    EXPECT_GT(OperatorCalls([&] { Convert(strided, d); }), 0) << "strides: to() expected";
  }
  const at::Tensor leaf = at::ones({4}, at::kFloat).requires_grad_();
  const at::Tensor half = Convert(leaf, at::kHalf);
  EXPECT_TRUE(half.requires_grad()) << "a gradient to record went around autograd";
  EXPECT_TRUE(RoundThrough(leaf, at::kHalf).requires_grad());
  const at::Tensor ints = at::arange(5, at::kLong);
  EXPECT_TRUE(at::equal(Convert(ints, at::kFloat), ints.to(at::kFloat)));
  EXPECT_TRUE(at::equal(Convert(at::ones({3}, at::kDouble), at::kHalf),
                        at::ones({3}, at::kDouble).to(at::kHalf)));
}

}  // namespace
}  // namespace paradiff
