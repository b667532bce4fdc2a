#include "kernels/numerics.h"

#include <ATen/ATen.h>

namespace paradiff {

at::ScalarType ToScalarType(DType d) {
  switch (d) {
    case DType::kFp32: return at::kFloat;
    case DType::kBf16: return at::kBFloat16;
    case DType::kFp16: return at::kHalf;
    case DType::kFp64: return at::kDouble;
  }
  return at::kFloat;
}

at::Tensor Numerics::Round(const at::Tensor& t) const {
  if (!emulate_fp16) return t;
  return t.to(at::kHalf).to(at::kFloat);
}

at::Tensor Numerics::In(const at::Tensor& t) const {
  if (emulate_fp16) return Round(t.to(at::kFloat));
  return t.scalar_type() == exec ? t : t.to(exec);
}

Numerics MakeNumerics(DType compute) {
  Numerics n;
  if (compute == DType::kFp16) {
    n.exec = at::kFloat;
    n.emulate_fp16 = true;
  } else {
    n.exec = ToScalarType(compute);
  }
  return n;
}

}  // namespace paradiff
