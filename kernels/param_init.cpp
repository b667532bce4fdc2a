#include "kernels/param_init.h"

#include <ATen/ATen.h>

#include "core/rng.h"

namespace paradiff {

at::Tensor GenerateParamSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t count) {
  at::Tensor out = at::empty({count}, at::kDouble);
  double* p = out.data_ptr<double>();
  const CounterStream stream(seed, "param/" + spec.name);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t idx = static_cast<uint64_t>(begin + i);
    switch (spec.init) {
      case InitKind::kNormal:
        p[i] = spec.scale * stream.Normal(idx);
        break;
      case InitKind::kOnes:
        p[i] = 1.0;
        break;
      case InitKind::kZeros:
        p[i] = 0.0;
        break;
      case InitKind::kDyadic:
        p[i] = spec.scale * (static_cast<double>(stream.Below(idx, 3)) - 1.0);
        break;
    }
  }
  return out;
}

at::Tensor GenerateParam(const ParamSpec& spec, uint64_t seed) {
  return GenerateParamSlice(spec, seed, 0, spec.numel()).view(spec.shape);
}

}  // namespace paradiff
