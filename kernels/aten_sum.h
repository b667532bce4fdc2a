// Sums of squares in float64 as LibTorch adds them (see Note [Sums in ATen's order]).
//
// Note [Sums in ATen's order]: the reference's gradient norm and the numeric oracle's scales sum
// the squares of float64 tensors, tensor by tensor, as `t.pow(2).sum()` does. Those sums decide
// the last bits of bounds and clip coefficients, so a loop that adds in another order would move
// them (and bench_digest with them). LibTorch's CPU sum of a contiguous tensor is a cascade sum
// (aten/src/ATen/native/cpu/SumKernel.cpp): W-lane vectors (W = 4 doubles under the AVX2 and
// default kernels, 8 under AVX512), read four at a time into four rows of accumulators, each row
// summed in a cascade of four levels (a level adds its 2^p values, p = max(4, ceil(log2 n) / 4),
// into the next); then the vectors left over into row 0, rows 1-3 into row 0, and a scalar that
// starts at 0, adds the elements past the last whole vector, then row 0's lanes in order. Shorter
// than W elements: the same over scalars. `x * x` is x.pow(2)'s rounding (ATen squares by one
// multiply). Which W this LibTorch uses is not exported: the first call compares both with
// at::sum on fixed data and keeps the one that agrees, bit for bit, on every probe; when neither
// does (another LibTorch) every call goes through the operators. Above 32768 elements ATen may
// split the sum across threads: those go through the operators too.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace paradiff {

// ReadScalar(t.pow(2).sum()), the same bits; in one loop for a contiguous CPU float64 tensor.
double SumOfSquares(const at::Tensor& t);

// The cascade over the squares of x[0 .. n), for `lanes` 4 or 8 (see Note [Sums in ATen's order];
// exposed for the tests: SumOfSquares picks the lanes).
double CascadeSumOfSquares(const double* x, int64_t n, int lanes);

}  // namespace paradiff
