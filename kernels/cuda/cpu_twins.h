// CPU twins of the CUDA kernels in kernels/cuda/ (cuda_kernels.h): plain C++, always built, no
// CUDA or torch headers. Each twin computes bit for bit what its kernel computes, and is itself
// tested against the engine's reference semantics (tests/gpu/cpu_twins_test.cpp):
// - CountNonFinite: the number of inf / nan elements of a flat float / half / bf16 buffer
//   (decided on the bit pattern: exponent all ones).
// - FloatToBFloat16Bits / FloatToHalfBits: fp32 -> bf16 / fp16 with round-to-nearest-even, equal to
//   c10::BFloat16(float) / c10::Half(float), NaN included (see Note [Cast NaN bits]).
// - AdamStep: one Adam / AdamW update of flat fp32 shards, equal to kernels/optim.cpp's
//   OptimizerUpdate on fp32 tensors (see Note [Fused Adam arithmetic]).
//
// Note [Cast NaN bits]: c10's scalar conversions give NaN -> 0x7FC0 (bf16, sign dropped) and
// NaN -> sign | 0x7E00 (fp16). The twins and the kernels return exactly those bits. ATen's
// vectorized copy kernels may produce other NaN payloads (e.g. 0xFFFF for bf16); they are still
// NaN, so comparisons with at::Tensor::to() treat any two NaNs as equal.
//
// Note [Fused Adam arithmetic]: OptimizerUpdate works on fp32 tensors with double scalars, which
// ATen rounds to float once per operation. AdamScalars holds exactly those float constants, made
// by MakeAdamScalars (the only place they are computed, shared by twin and kernel). Per element,
// in this order, every operation rounded to fp32 (no fused multiply-add):
//   AdamW:  p = p * decay                      (decay = float(1 - lr * wd))
//   Adam:   g = g + p * l2   (only if wd != 0)  (l2 = float(wd))
//   m = m * beta1 + g * one_minus_beta1
//   v = v * beta2 + (g * g) * one_minus_beta2
//   denom = sqrt(v) / sqrt_bc2 + eps            (sqrt_bc2 = float(sqrt(1 - beta2^step)))
//   p = p - (m / denom) * step_size             (step_size = float(lr / (1 - beta1^step)))
#pragma once

#include <cstdint>
#include <cstring>

namespace paradiff {
namespace cuda {

enum class FlatDtype { kFloat32, kFloat16, kBFloat16 };
const char* Name(FlatDtype dtype);
// Bytes per element: 4 or 2.
int ElementBytes(FlatDtype dtype);

// The optimizer hyper-parameters of one step (kernels/optim.h semantics). step is 1-based.
struct AdamStepParams {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  int64_t step = 1;
  bool decoupled = false;  // true: AdamW (decoupled decay), false: Adam (L2 added to the gradient)
};

// The fp32 constants of see Note [Fused Adam arithmetic].
struct AdamScalars {
  float decay = 1.0f;  // AdamW only
  float l2 = 0.0f;     // Adam only, used when use_l2 (weight_decay != 0 in double)
  bool use_l2 = false;
  float beta1 = 0.0f, one_minus_beta1 = 0.0f, beta2 = 0.0f, one_minus_beta2 = 0.0f;
  float sqrt_bc2 = 1.0f, eps = 0.0f, step_size = 0.0f;
  bool decoupled = false;
};
// Throws std::invalid_argument when step < 1.
AdamScalars MakeAdamScalars(const AdamStepParams& params);

// Twins. n >= 0; pointers may be null when n == 0.
int64_t CountNonFinite(const void* data, int64_t n, FlatDtype dtype);
// Inline: the CPU bf16 gemm (kernels/bf16_gemm.cpp) rounds every element it writes with it.
inline uint16_t FloatToBFloat16Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0u;  // see Note [Cast NaN bits]
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
uint16_t FloatToHalfBits(float x);
void CastToBFloat16(const float* in, uint16_t* out, int64_t n);
void CastToHalf(const float* in, uint16_t* out, int64_t n);
// In place on param, exp_avg, exp_avg_sq (n elements each); grad is read only.
void AdamStep(const AdamStepParams& params, float* param, const float* grad, float* exp_avg,
              float* exp_avg_sq, int64_t n);

}  // namespace cuda
}  // namespace paradiff
