#include "oracles/piece_values.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace paradiff {

namespace {

template <typename T>
void Widen(const at::Tensor& src, double* dst) {
  const T* p = src.data_ptr<T>();
  std::transform(p, p + src.numel(), dst,
                 [](T v) { return static_cast<double>(static_cast<float>(v)); });
}

}  // namespace

void CopyAsDouble(const at::Tensor& src, double* dst) {
  if (src.numel() == 0) return;
  if (src.is_contiguous() && src.device().is_cpu()) {
    switch (src.scalar_type()) {
      case at::kDouble: {
        const double* p = src.data_ptr<double>();
        std::copy(p, p + src.numel(), dst);
        return;
      }
      case at::kFloat: {
        const float* p = src.data_ptr<float>();
        std::copy(p, p + src.numel(), dst);
        return;
      }
      case at::kBFloat16:
        Widen<at::BFloat16>(src, dst);
        return;
      case at::kHalf:
        Widen<at::Half>(src, dst);
        return;
      default:
        break;
    }
  }
  // Anything else (not reported by the engines; kept correct rather than fast).
  at::Tensor d = src.to(at::kDouble).contiguous().reshape({-1});
  std::copy(d.data_ptr<double>(), d.data_ptr<double>() + d.numel(), dst);
}

}  // namespace paradiff
