// CPU twins of the CUDA kernels (cpu_twins.h). Built with -ffp-contract=off (cmake/Cuda.cmake) so
// the compiler never fuses a multiply and an add: every operation rounds to fp32 on its own,
// exactly like the kernels' __f*_rn intrinsics and like ATen's elementwise ops.
#include "kernels/cuda/cpu_twins.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace paradiff {
namespace cuda {
namespace {

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

// Exponent all ones <=> inf or nan, for each storage format.
template <typename Bits, Bits kExponentMask>
int64_t CountExponentAllOnes(const void* data, int64_t n) {
  const auto* p = static_cast<const Bits*>(data);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += (p[i] & kExponentMask) == kExponentMask;
  return count;
}

constexpr uint32_t kFloatAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kFloatInf = 0x7F800000u;
// fp16 limits as fp32 bit patterns.
constexpr uint32_t kHalfOverflow = 0x477FF000u;    // 65520: rounds to inf (tie, 65504 is odd)
constexpr uint32_t kHalfMinNormal = 0x38800000u;   // 2^-14
constexpr uint32_t kHalfHalfMinSub = 0x33000000u;  // 2^-25: half the smallest subnormal -> 0
constexpr uint32_t kRebias = 0x38000000u;          // (127 - 15) << 23

}  // namespace

const char* Name(FlatDtype dtype) {
  switch (dtype) {
    case FlatDtype::kFloat32:
      return "float32";
    case FlatDtype::kFloat16:
      return "float16";
    case FlatDtype::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

int ElementBytes(FlatDtype dtype) { return dtype == FlatDtype::kFloat32 ? 4 : 2; }

AdamScalars MakeAdamScalars(const AdamStepParams& p) {
  if (p.step < 1)
    throw std::invalid_argument("AdamStep: step=" + std::to_string(p.step) + " must be >= 1");
  AdamScalars s;
  s.decoupled = p.decoupled;
  if (p.decoupled) {
    s.decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
  } else {
    s.l2 = static_cast<float>(p.weight_decay);
    s.use_l2 = p.weight_decay != 0.0;
  }
  s.beta1 = static_cast<float>(p.beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - p.beta1);
  s.beta2 = static_cast<float>(p.beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - p.beta2);
  const double bc1 = 1.0 - std::pow(p.beta1, static_cast<double>(p.step));
  const double bc2 = 1.0 - std::pow(p.beta2, static_cast<double>(p.step));
  s.sqrt_bc2 = static_cast<float>(std::sqrt(bc2));
  s.eps = static_cast<float>(p.eps);
  s.step_size = static_cast<float>(p.lr / bc1);
  return s;
}

int64_t CountNonFinite(const void* data, int64_t n, FlatDtype dtype) {
  switch (dtype) {
    case FlatDtype::kFloat32:
      return CountExponentAllOnes<uint32_t, 0x7F800000u>(data, n);
    case FlatDtype::kFloat16:
      return CountExponentAllOnes<uint16_t, 0x7C00u>(data, n);
    case FlatDtype::kBFloat16:
      return CountExponentAllOnes<uint16_t, 0x7F80u>(data, n);
  }
  throw std::invalid_argument("CountNonFinite: unknown dtype");
}

uint16_t FloatToHalfBits(float x) {
  const uint32_t u = Bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & kFloatAbsMask;
  if (a > kFloatInf) return sign | 0x7E00u;  // see Note [Cast NaN bits]
  if (a >= kHalfOverflow) return sign | 0x7C00u;
  if (a <= kHalfHalfMinSub) return sign;
  uint32_t h, rem, half;
  if (a < kHalfMinNormal) {  // subnormal result: round(mantissa * 2^(exp - 126))
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - static_cast<int>(a >> 23);  // 14 .. 24
    h = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    half = 1u << (shift - 1);
  } else {
    h = (a - kRebias) >> 13;
    rem = a & 0x1FFFu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (h & 1u))) ++h;  // a carry moves into the exponent correctly
  return static_cast<uint16_t>(sign | h);
}

void CastToBFloat16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBFloat16Bits(in[i]);
}

void CastToHalf(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToHalfBits(in[i]);
}

void AdamStep(const AdamStepParams& params, float* param, const float* grad, float* exp_avg,
              float* exp_avg_sq, int64_t n) {
  const AdamScalars s = MakeAdamScalars(params);
  for (int64_t i = 0; i < n; ++i) {  // see Note [Fused Adam arithmetic], operation by operation
    float p = param[i];
    float g = grad[i];
    if (s.decoupled) {
      p = p * s.decay;
    } else if (s.use_l2) {
      const float wp = p * s.l2;
      g = g + wp;
    }
    const float m1 = exp_avg[i] * s.beta1;
    const float m2 = g * s.one_minus_beta1;
    const float m = m1 + m2;
    const float v1 = exp_avg_sq[i] * s.beta2;
    const float gg = g * g;
    const float v2 = gg * s.one_minus_beta2;
    const float v = v1 + v2;
    const float root = std::sqrt(v);
    const float scaled = root / s.sqrt_bc2;
    const float denom = scaled + s.eps;
    const float ratio = m / denom;
    const float update = ratio * s.step_size;
    param[i] = p - update;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace cuda
}  // namespace paradiff
