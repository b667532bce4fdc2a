#include "kernels/numerics.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <c10/util/TypeCast.h>
#include <dlfcn.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include <cmath>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "comm/fresh.h"
#include "kernels/batched_gemm.h"
#include "kernels/bf16_gemm.h"
#include "kernels/cuda/cpu_twins.h"

namespace paradiff {

namespace {

// Note [No oneDNN]: LibTorch sends bf16 matmuls (linear, addmm, bmm) on an AVX-512 CPU to oneDNN
// (Debian's libdnnl 2.6.3), which JIT-compiles a brgemm kernel for every new shape. In a
// long-lived process that has already run a few hundred configs of many shapes (a campaign
// worker), compiling one more kernel occasionally works from a corrupted description and kills
// the worker (std::bad_alloc, std::bad_array_new_length or SIGSEGV inside brgemm_kernel_create),
// while the same config passes in a fresh process. Without oneDNN, bf16 matmuls run in ATen's own
// CPU gemm (fp32 accumulation), which this process runs faster with the same bits (see Note
// [Fast bf16 gemm] in bf16_gemm.cpp). Turned off once per process, before the first forward, by the
// one factory of the arithmetic that the engine and the reference both use, so the two always run
// the same kernels. Evidence: docs/EVIDENCE.md.
//
// Note [Single-threaded BLAS]: ranks are threads and checks run side by side, so gemm is called
// from several threads at once. Debian's OpenBLAS (pthreads build) splits a large enough gemm over
// its own thread pool, and two such calls from different threads can deadlock in it (one caller
// spinning in exec_blas, the other waiting on its mutex). Its pool is turned off in the
// same once-per-process place: each calling thread runs its own gemm (the sizes are small, and the
// parallelism is the ranks'). Looked up at run time, so a LibTorch on another BLAS is unaffected.
// Evidence: docs/EVIDENCE.md.
void ProcessWideNumerics() {
  static std::once_flag once;
  std::call_once(once, [] {
    at::globalContext().setUserEnabledMkldnn(false);
    using SetThreads = void (*)(int);
    if (auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
      set(1);
    InstallFastBf16Gemm();  // see Note [Fast bf16 gemm] in bf16_gemm.cpp
    InstallBatchedGemm();   // see Note [Batched products from pointers] in batched_gemm.cpp
  });
}

}  // namespace

at::ScalarType ToScalarType(DType d) {
  switch (d) {
    case DType::kFp32:
      return at::kFloat;
    case DType::kBf16:
      return at::kBFloat16;
    case DType::kFp16:
      return at::kHalf;
    case DType::kFp64:
      return at::kDouble;
  }
  return at::kFloat;
}

// Note [Random rounding]: a target with its own kernels rounds differently from the reference's,
// so its rounding error is another sample of the noise the same-precision twin samples once (see
// Note [Twin samples] in oracles/reference.h). These numerics draw further samples: kernels run in
// float32 and each op's result is rounded to the 16-bit dtype stochastically (up with probability
// its distance from the lower neighbour over the gap, as in Monte Carlo arithmetic's "average"
// mode); the gradient flowing back into the result is rounded the same way, as a 16-bit kernel's
// backward rounds its output. 16-bit kernels accumulate in float32 (ATen's CPU gemm, GPU tensor
// cores), so their error is their result's rounding, which this draws afresh: its error per
// element is unbiased and at most one unit in the last place, 0.41 of one in RMS against
// round-to-nearest's 0.29 (errors uniform in the gap), so a sample is as large as the twin's or
// larger. Parameters and inputs are cast to nearest (`In`), as every framework casts them.
//
// The rounding works on the float64 bit pattern: adding a uniform integer below 2^(52 - m) (m the
// target's explicit significand bits) and clearing those bits rounds the magnitude up exactly with
// that probability (a carry into the exponent is the next binade's first value); the float64
// result then converts to the target exactly. Below the target's normal range the conversion
// rounds to nearest again, a legitimate rounding too.
at::Tensor RoundAtRandom(const at::Tensor& x, at::ScalarType to, at::Generator gen) {
  int64_t mantissa = 0;
  switch (to) {
    case at::kBFloat16:
      mantissa = 7;
      break;
    case at::kHalf:
      mantissa = 10;
      break;
    default:
      throw std::logic_error("RoundAtRandom: no random rounding to this dtype");
  }
  const int64_t drop = 52 - mantissa;
  const at::Tensor wide = x.detach().to(at::kDouble).contiguous();
  const at::Tensor noise =
      at::randint(0, int64_t{1} << drop, wide.sizes(), gen, at::TensorOptions().dtype(at::kLong));
  const at::Tensor bits = wide.view(at::kLong).add(noise).bitwise_and(~((int64_t{1} << drop) - 1));
  return at::where(wide.isfinite(), bits.view(at::kDouble), wide).to(to).to(x.scalar_type());
}

// Note [Conversions by hand]: a check converts a few thousand small tensors between float32 and
// float64, bf16 and fp16 (parameters into the execution dtype, the fp16 emulation's rounding of
// every op result and gradient, the truth's float64 copies), and each `to` is four operator calls
// through the dispatcher (to, _to_copy, empty_strided, copy_) and a TensorIterator for a few
// hundred elements. For a contiguous CPU tensor whose conversion autograd would not record, these
// convert in one loop into a tensor allocated without the dispatcher, with c10::convert, the
// conversion ATen's copy kernel applies to each element (round to nearest even, overflow to inf).
// NaN is the exception: torch 1.13's copy kernel writes a bf16 NaN as 0xFFFF, c10's conversion as
// 0x7FC0, so a tensor with a NaN goes through `to` after all, and every result keeps `to`'s bits.
// Anything else (a gradient to record, strides, another dtype or device) goes through `to`.
// tests/unit/conversions_test.cpp holds each pair to `to` bit for bit over every bf16 and fp16
// value and millions of float32 ones, and checks that no operator is called.
namespace {

// NaN among n values, from their bits (branch-free loops the compiler vectorizes).
bool AnyNan(const float* p, int64_t n) {
  const uint32_t* b = reinterpret_cast<const uint32_t*>(p);
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= static_cast<uint32_t>((b[i] & 0x7FFFFFFFu) > 0x7F800000u);
  return any != 0;
}
bool AnyNan(const double* p, int64_t n) {
  const uint64_t* b = reinterpret_cast<const uint64_t*>(p);
  uint64_t any = 0;
  for (int64_t i = 0; i < n; ++i)
    any |= static_cast<uint64_t>((b[i] & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull);
  return any != 0;
}
bool AnyNan16(const uint16_t* b, int64_t n, uint16_t inf) {  // bf16: 0x7F80, fp16: 0x7C00
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= static_cast<uint32_t>((b[i] & 0x7FFFu) > inf);
  return any != 0;
}
bool AnyNan(const c10::BFloat16* p, int64_t n) {
  return AnyNan16(reinterpret_cast<const uint16_t*>(p), n, 0x7F80u);
}
bool AnyNan(const c10::Half* p, int64_t n) {
  return AnyNan16(reinterpret_cast<const uint16_t*>(p), n, 0x7C00u);
}

#if defined(__x86_64__)
#define PARADIFF_F16C __attribute__((target("avx,f16c")))
// The fp16 conversions in hardware (round to nearest even, _MM_FROUND_TO_NEAREST_INT): c10's
// results, and cuda::CastToHalf's, for every value that is not NaN
// (tests/unit/conversions_test.cpp).
PARADIFF_F16C void ToHalfF16c(const float* in, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = _cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT);
}
PARADIFF_F16C void ThroughHalfF16c(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = _cvtsh_ss(_cvtss_sh(in[i], _MM_FROUND_TO_NEAREST_INT));
}
bool HaveF16c() {  // AVX with its OS support, and CPUID.1:ECX's F16C bit (clang has no "f16c")
  static const bool have = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) != 0 &&
           (c & bit_F16C) != 0;
  }();
  return have;
}
#else
bool HaveF16c() { return false; }
void ToHalfF16c(const float*, uint16_t*, int64_t) {}
void ThroughHalfF16c(const float*, float*, int64_t) {}
#endif

// One loop per pair; false on a NaN in the input (the caller converts with `to` then), except
// bf16 -> float32, a shift of the bits in both ways. The narrowings are the CPU twins' own
// (kernels/cuda/cpu_twins.h, c10's rounding), whose NaN branch the check before them leaves unused.
template <typename From, typename To>
bool ConvertLoop(const void* src, void* dst, int64_t n) {
  const From* in = static_cast<const From*>(src);
  To* out = static_cast<To*>(dst);
  if constexpr (std::is_same_v<From, c10::BFloat16> && std::is_same_v<To, float>) {
    const uint16_t* b = static_cast<const uint16_t*>(src);
    uint32_t* o = static_cast<uint32_t*>(dst);
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<uint32_t>(b[i]) << 16;
    return true;
  }
  if (AnyNan(in, n)) return false;
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, c10::BFloat16>) {
    cuda::CastToBFloat16(in, static_cast<uint16_t*>(dst), n);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, c10::Half>) {
    (HaveF16c() ? ToHalfF16c : cuda::CastToHalf)(in, static_cast<uint16_t*>(dst), n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = c10::convert<To>(in[i]);
  }
  return true;
}

template <typename Narrow>
bool RoundThroughLoop(const void* src, void* dst, int64_t n) {
  const float* in = static_cast<const float*>(src);
  float* out = static_cast<float*>(dst);
  if (AnyNan(in, n)) return false;
  if constexpr (std::is_same_v<Narrow, c10::BFloat16>) {
    uint32_t* o = static_cast<uint32_t*>(dst);
    for (int64_t i = 0; i < n; ++i) o[i] = uint32_t{cuda::FloatToBFloat16Bits(in[i])} << 16;
  } else if (HaveF16c()) {
    ThroughHalfF16c(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = c10::convert<float>(c10::convert<Narrow>(in[i]));
  }
  return true;
}

using Loop = bool (*)(const void*, void*, int64_t);

// The loop for from -> to, or null where `to` converts (a pair not held to `to` by the tests).
Loop ConvertLoopFor(at::ScalarType from, at::ScalarType to) {
  using S = at::ScalarType;
  if (from == S::Float) {
    if (to == S::Double) return ConvertLoop<float, double>;
    if (to == S::BFloat16) return ConvertLoop<float, c10::BFloat16>;
    if (to == S::Half) return ConvertLoop<float, c10::Half>;
  } else if (to == S::Float) {
    if (from == S::Double) return ConvertLoop<double, float>;
    if (from == S::BFloat16) return ConvertLoop<c10::BFloat16, float>;
    if (from == S::Half) return ConvertLoop<c10::Half, float>;
  } else if (to == S::Double) {
    if (from == S::BFloat16) return ConvertLoop<c10::BFloat16, double>;
    if (from == S::Half) return ConvertLoop<c10::Half, double>;
  }
  return nullptr;
}

bool ByHand(const at::Tensor& t) { return t.is_cpu() && t.is_contiguous() && !AutogradRecords(t); }

}  // namespace

at::Tensor Convert(const at::Tensor& t, at::ScalarType d) {
  const Loop loop = ByHand(t) ? ConvertLoopFor(t.scalar_type(), d) : nullptr;
  if (loop == nullptr) return t.to(d);
  at::Tensor out = at::detail::empty_cpu(t.sizes(), d);
  return loop(t.data_ptr(), out.data_ptr(), t.numel()) ? out : t.to(d);
}

at::Tensor RoundThrough(const at::Tensor& t, at::ScalarType narrow) {
  const bool loop = ByHand(t) && t.scalar_type() == at::kFloat &&
                    (narrow == at::kHalf || narrow == at::kBFloat16);
  if (!loop) return t.to(narrow).to(at::kFloat);
  at::Tensor out = at::detail::empty_cpu(t.sizes(), at::kFloat);
  const bool done = narrow == at::kHalf
                        ? RoundThroughLoop<c10::Half>(t.data_ptr(), out.data_ptr(), t.numel())
                        : RoundThroughLoop<c10::BFloat16>(t.data_ptr(), out.data_ptr(), t.numel());
  return done ? out : t.to(narrow).to(at::kFloat);
}

double ReadScalar(const at::Tensor& t) {
  if (t.is_cpu() && t.numel() == 1) {
    if (t.scalar_type() == at::kDouble) return *static_cast<const double*>(t.data_ptr());
    if (t.scalar_type() == at::kFloat) return *static_cast<const float*>(t.data_ptr());
  }
  return t.item<double>();
}

bool AllFinite(const at::Tensor& t) {
  if (!t.is_cpu() || !t.is_contiguous()) return t.isfinite().all().item<bool>();
  const void* data = t.data_ptr();
  const int64_t n = t.numel();
  switch (t.scalar_type()) {
    case at::kDouble: {  // the CUDA kernels' flat dtypes (cuda::FlatDtype) have no float64
      constexpr uint64_t kExponent = 0x7FF0000000000000;
      const uint64_t* bits = static_cast<const uint64_t*>(data);
      for (int64_t i = 0; i < n; ++i)
        if ((bits[i] & kExponent) == kExponent) return false;
      return true;
    }
    case at::kFloat:
      return cuda::CountNonFinite(data, n, cuda::FlatDtype::kFloat32) == 0;
    case at::kBFloat16:
      return cuda::CountNonFinite(data, n, cuda::FlatDtype::kBFloat16) == 0;
    case at::kHalf:
      return cuda::CountNonFinite(data, n, cuda::FlatDtype::kFloat16) == 0;
    default:
      return t.isfinite().all().item<bool>();
  }
}

at::Tensor Numerics::Round(const at::Tensor& t) const {
  if (random) {
    // The forward value rounded; the gradient through it the identity, then rounded by the hook.
    at::Tensor out = t + (RoundAtRandom(t, rounded, *random) - t.detach());
    if (out.requires_grad()) {
      const at::Generator gen = *random;
      const at::ScalarType to = rounded;
      out.register_hook([gen, to](const at::Tensor& g) { return RoundAtRandom(g, to, gen); });
    }
    return out;
  }
  if (!emulate_fp16) return t;
  return RoundThrough(t, at::kHalf);
}

at::Tensor Numerics::In(const at::Tensor& t) const {
  if (random) return t.to(rounded).to(exec);
  if (emulate_fp16) return Round(AsDType(t, at::kFloat));
  return AsDType(t, exec);
}

Numerics MakeNumerics(DType compute) {
  ProcessWideNumerics();  // see Note [No oneDNN], see Note [Single-threaded BLAS]
  Numerics n;
  if (compute == DType::kFp16) {
    n.exec = at::kFloat;
    n.emulate_fp16 = true;
  } else {
    n.exec = ToScalarType(compute);
  }
  return n;
}

Numerics MakeRandomRoundingNumerics(DType compute, uint64_t seed) {
  ProcessWideNumerics();
  if (compute != DType::kBf16 && compute != DType::kFp16)
    throw std::logic_error("random rounding is for 16-bit compute dtypes");
  Numerics n;
  n.exec = at::kFloat;
  n.rounded = ToScalarType(compute);
  n.random = at::make_generator<at::CPUGeneratorImpl>(seed);
  return n;
}

}  // namespace paradiff
