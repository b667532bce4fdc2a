// Numerics: how a precision setting maps onto LibTorch dtypes on this device, and the fp16
// emulation used on CPU (see Note [fp16 emulation]). Pure per-tensor math, shared by the engine and
// the reference.
//
// Note [fp16 emulation]: LibTorch's CPU kernels lack fp16 matmul / layer_norm / softmax. GPUs run
// fp16 matrix work with fp16 operands and fp32 accumulation, rounding the result to fp16. On CPU we
// execute in fp32 on values that are exactly representable in fp16 and round every op's result to
// fp16 (Numerics::Round), which reproduces that rounding, overflow to inf included.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

#include "core/config.h"

namespace paradiff {

at::ScalarType ToScalarType(DType d);

// t.to(d), the same bits, converted in one loop where it can be (see Note [Conversions by hand]).
at::Tensor Convert(const at::Tensor& t, at::ScalarType d);

// t.to(d) (t itself when it already has dtype d) without a call through the dispatcher when
// nothing converts: the engine and the references cast many tensors of the right dtype already.
inline at::Tensor AsDType(const at::Tensor& t, at::ScalarType d) {
  return t.scalar_type() == d ? t : Convert(t, d);
}

// t's values rounded to `narrow` (fp16 or bf16) and back to float32: t.to(narrow).to(kFloat), the
// same bits, in one loop where it can be (see Note [Conversions by hand]).
at::Tensor RoundThrough(const at::Tensor& t, at::ScalarType narrow);

// t as contiguous float64 (t itself when it already is), for loops over its values.
inline at::Tensor AsFloat64(const at::Tensor& t) { return AsDType(t, at::kDouble).contiguous(); }

// t.item<double>() of a one-element tensor, read from its data where it is a CPU float64 or float32
// tensor (a sum, a norm, a loss: no trip through the dispatcher), else by item().
double ReadScalar(const at::Tensor& t);

// t.isfinite().all().item<bool>(), read in one loop (no operator calls) when t is a contiguous
// CPU tensor of a floating dtype.
bool AllFinite(const at::Tensor& t);

// The arithmetic of one forward/backward pass.
struct Numerics {
  at::ScalarType exec = at::kFloat;  // dtype kernels run in
  bool emulate_fp16 = false;         // round each op's result to fp16 (exec is fp32 then)
  // Set: each op's result, and the gradient that flows back into it, is rounded to `rounded` at
  // random (see Note [Random rounding]); exec is float32 then.
  std::optional<at::Generator> random;
  at::ScalarType rounded = at::kHalf;
  // Round an op result to the storage precision (identity unless fp16 is emulated or rounding is
  // random).
  at::Tensor Round(const at::Tensor& t) const;
  // Bring a stored tensor (parameter, activation) into the execution dtype.
  at::Tensor In(const at::Tensor& t) const;
};

// Numerics for a compute dtype; kFp64 gives the float64 truth. The first call turns LibTorch's
// oneDNN path off for the whole process (see Note [No oneDNN] in numerics.cpp).
Numerics MakeNumerics(DType compute);

// Numerics for a 16-bit compute dtype that run kernels in float32 and round every op result and
// every gradient flowing into it to `compute` at random, from `seed` (see Note [Random rounding]).
Numerics MakeRandomRoundingNumerics(DType compute, uint64_t seed);

// `x` rounded stochastically to `to` (bf16 or fp16): to the neighbour of larger magnitude with
// probability |x - smaller| / |larger - smaller|, else to the smaller; returned in x's dtype.
// Non-finite values stay.
at::Tensor RoundAtRandom(const at::Tensor& x, at::ScalarType to, at::Generator gen);

}  // namespace paradiff
