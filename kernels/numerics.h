// Numerics: how a precision setting maps onto LibTorch dtypes on this device, and the fp16
// emulation used on CPU (see Note [fp16 emulation]). Pure per-tensor math, shared by the engine and
// the reference.
//
// Note [fp16 emulation]: LibTorch's CPU kernels lack fp16 matmul / layer_norm / softmax. GPUs run
// fp16 matrix work with fp16 operands and fp32 accumulation, rounding the result to fp16. On CPU we
// execute in fp32 on values that are exactly representable in fp16 and round every op's result to
// fp16 (Numerics::Round), which reproduces that rounding, overflow to inf included.
#pragma once

#include <ATen/core/Tensor.h>

#include "core/config.h"

namespace paradiff {

at::ScalarType ToScalarType(DType d);

// The arithmetic of one forward/backward pass.
struct Numerics {
  at::ScalarType exec = at::kFloat;  // dtype kernels run in
  bool emulate_fp16 = false;         // round each op's result to fp16 (exec is fp32 then)
  // Round an op result to the storage precision (identity unless fp16 is emulated).
  at::Tensor Round(const at::Tensor& t) const;
  // Bring a stored tensor (parameter, activation) into the execution dtype.
  at::Tensor In(const at::Tensor& t) const;
};

// Numerics for a compute dtype; kFp64 gives the float64 truth. The first call turns LibTorch's
// oneDNN path off for the whole process (see Note [No oneDNN] in numerics.cpp).
Numerics MakeNumerics(DType compute);

}  // namespace paradiff
