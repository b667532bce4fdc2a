// Reading a reported piece's values (sut/observations.h) as float64 without torch operators.
// A check reads thousands of small pieces, and every operator call costs about a microsecond of
// dispatch whatever its size (docs/PERFORMANCE.md); the conversion to float64 is exact for every
// dtype a rank holds (fp32, bf16, fp16, fp64), so this gives exactly what `.to(at::kDouble)` gives.
#pragma once

#include <ATen/core/Tensor.h>

namespace paradiff {

// Writes the values of `src` (any shape, read in its logical order) to dst[0 .. src.numel()).
void CopyAsDouble(const at::Tensor& src, double* dst);

}  // namespace paradiff
