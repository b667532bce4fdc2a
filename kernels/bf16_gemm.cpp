#include "kernels/bf16_gemm.h"

#include <ATen/ATen.h>
#include <ATen/native/CPUBlas.h>
#include <ATen/native/DispatchStub.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cpu_twins.h"

namespace paradiff {

// Note [Fast bf16 gemm]: with oneDNN off (see Note [No oneDNN] in numerics.cpp), LibTorch 1.13
// multiplies bfloat16 matrices on the CPU in ATen's reference gemm (BlasKernel.cpp), one scalar
// loop per output element: about a tenth of a campaign's CPU. This file computes the same bits
// faster and puts itself where ATen's gemm dispatch looks (the `gemm_stub` that every bfloat16
// addmm, mm and bmm reaches with its transpose flags and leading dimensions already decided), so
// every caller above it, autograd's backward formulas included, is untouched. The arithmetic, per
// variant of ATen's gemm_core_, with R(x) bfloat16's round to nearest even (NaN to 0x7FC0):
// - A not transposed (B either way): C first scaled (`scale_`: nothing for beta 1, +0 for beta 0,
//   else C = R(C * R(beta))), then for each l in order C = R(C + R(A(i, l) * (B(l, j) * alpha))):
//   a rounding per term. Vectorized over i with C kept in registers across l.
// - A transposed, B not: s = fma(A(i, l), B(l, j), s) from +0 over l in order (ATen's build
//   contracts `sum += a * b` into a fused multiply-add), then C = R(alpha * s) for beta 0, else
//   C = R(fma(C, beta, alpha * s)). Vectorized over eight columns j at once, each lane its own
//   chain in ATen's order.
// - both transposed: per element, as ATen (rare).
// The rest is exact floating point, so the bits follow from the order. Which variant ATen built
// with fused multiply-adds is its build's business: InstallFastBf16Gemm first runs both kernels on
// a probe of every variant with special values (infinities, NaN, subnormals, overflow) and installs
// only if every bit agrees, and only on a CPU with AVX2 and FMA; otherwise ATen's kernel stays.
// tests/unit/bf16_gemm_test.cpp compares the two on random shapes, strides and scalars; the
// benchmark is bench/bench_bf16_gemm.cpp. This file compiles with -ffp-contract=off: every fusion
// here is written out.

namespace {

#define PARADIFF_AVX2 __attribute__((target("avx2,fma")))

float Widen(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// c10's round to nearest even, NaN to 0x7FC0 (see Note [Cast NaN bits] in cuda/cpu_twins.h).
uint16_t Narrow(float f) { return cuda::FloatToBFloat16Bits(f); }

float Round(float f) { return Widen(Narrow(f)); }

// One term of the scalar variant (both transposed): c + a * b_alpha, rounded twice as ATen
// rounds it.
uint16_t Step(uint16_t c, uint16_t a, float b_alpha) {
  return Narrow(Widen(c) + Round(Widen(a) * b_alpha));
}

void Scale(const Bf16Gemm& g) {
  if (g.beta == 1.0f) return;
  const float beta = Round(g.beta);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      uint16_t& c = g.c[j * g.ldc + i];
      c = g.beta == 0.0f ? uint16_t{0} : Narrow(Widen(c) * beta);
    }
}

PARADIFF_AVX2 inline __m256 WidenV(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

PARADIFF_AVX2 inline void StoreV(uint16_t* p, __m256 rounded) {
  const __m256i s = _mm256_srli_epi32(_mm256_castps_si256(rounded), 16);
  const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_packus_epi32(lo, hi));
}

// c10's round to nearest even but for NaNs, which stay NaNs of their own payload: every NaN inside
// the untransposed kernel's chains has zeros in its low 16 bits (a widened bfloat16's payload,
// carried by the arithmetic, or the default NaN of inf - inf or 0 * inf), so the rounding's carry
// cannot reach its exponent. A NaN stays a NaN through the rest of a chain, so turning it into
// 0x7FC0 once, as StoreC does, gives the bits of rounding it at every step.
PARADIFF_AVX2 inline __m256 RoundKeepingNanV(__m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i up = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF)));
  return _mm256_castsi256_ps(_mm256_and_si256(up, _mm256_set1_epi32(int32_t(0xFFFF0000u))));
}

// One term for eight rows: acc + a * val, rounded twice as ATen rounds it (NaNs aside: StoreC).
PARADIFF_AVX2 inline __m256 StepV(__m256 acc, __m256 a, __m256 val) {
  return RoundKeepingNanV(_mm256_add_ps(acc, RoundKeepingNanV(_mm256_mul_ps(a, val))));
}

// C's rows [i, i + 8) of one column, zeros past row m (a partial block goes through a copy);
// zeros where beta is 0.
PARADIFF_AVX2 inline __m256 LoadC(const uint16_t* c, int64_t rows, bool zero) {
  if (zero) return _mm256_setzero_ps();  // beta 0: `scale_` zeroes C first
  if (rows >= 8) return WidenV(c);
  uint16_t part[8] = {};
  std::copy(c, c + rows, part);
  return WidenV(part);
}

// `rounded` by StepV: its NaNs become 0x7FC0 here.
PARADIFF_AVX2 inline void StoreC(uint16_t* c, int64_t rows, __m256 rounded) {
  rounded = _mm256_blendv_ps(rounded, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FC00000)),
                             _mm256_cmp_ps(rounded, rounded, _CMP_UNORD_Q));
  if (rows >= 8) return StoreV(c, rounded);
  uint16_t part[8];
  StoreV(part, rounded);
  std::copy(part, part + rows, c);
}

// Untransposed A, B(l, j) at b[l * bl + j * bj]. A is widened once into `packed` (k rows of mp
// floats, mp = m rounded up to eight, zeros past m); C is then run four columns at a time, in
// blocks of 32 rows of one column or eight rows of four columns: four chains of roundings kept in
// registers across l (one chain alone would wait on its own latency).
PARADIFF_AVX2 void UntransposedA(const Bf16Gemm& g, int64_t bl, int64_t bj) {
  const bool zero = g.beta == 0.0f;
  if (!zero) Scale(g);
  const int64_t mp = (g.m + 7) / 8 * 8, rows32 = mp / 32 * 32;
  thread_local std::vector<float> packed, vals;
  packed.assign(size_t(mp * g.k), 0.0f);
  vals.resize(size_t(g.k) * 4);
  for (int64_t l = 0; l < g.k; ++l)
    for (int64_t i = 0; i < g.m; ++i) packed[size_t(l * mp + i)] = Widen(g.a[l * g.lda + i]);
  const float* a = packed.data();
  for (int64_t j0 = 0; j0 < g.n; j0 += 4) {
    const int64_t nj = std::min<int64_t>(4, g.n - j0);
    for (int64_t l = 0; l < g.k; ++l)
      for (int64_t t = 0; t < nj; ++t)
        vals[size_t(l * 4 + t)] = Widen(g.b[l * bl + (j0 + t) * bj]) * g.alpha;
    const float* v = vals.data();
    for (int64_t t = 0; t < nj; ++t) {
      uint16_t* c = g.c + (j0 + t) * g.ldc;
      for (int64_t i = 0; i < rows32; i += 32) {
        __m256 c0 = LoadC(c + i, g.m - i, zero), c1 = LoadC(c + i + 8, g.m - i - 8, zero),
               c2 = LoadC(c + i + 16, g.m - i - 16, zero),
               c3 = LoadC(c + i + 24, g.m - i - 24, zero);
        for (int64_t l = 0; l < g.k; ++l) {
          const float* al = a + l * mp + i;
          const __m256 val = _mm256_set1_ps(v[l * 4 + t]);
          c0 = StepV(c0, _mm256_loadu_ps(al), val);
          c1 = StepV(c1, _mm256_loadu_ps(al + 8), val);
          c2 = StepV(c2, _mm256_loadu_ps(al + 16), val);
          c3 = StepV(c3, _mm256_loadu_ps(al + 24), val);
        }
        StoreC(c + i, g.m - i, c0), StoreC(c + i + 8, g.m - i - 8, c1);
        StoreC(c + i + 16, g.m - i - 16, c2), StoreC(c + i + 24, g.m - i - 24, c3);
      }
    }
    for (int64_t i = rows32; i < mp; i += 8) {
      uint16_t* c = g.c + j0 * g.ldc + i;
      const int64_t rows = g.m - i;
      if (nj == 4) {
        __m256 c0 = LoadC(c, rows, zero), c1 = LoadC(c + g.ldc, rows, zero),
               c2 = LoadC(c + 2 * g.ldc, rows, zero), c3 = LoadC(c + 3 * g.ldc, rows, zero);
        for (int64_t l = 0; l < g.k; ++l) {
          const __m256 al = _mm256_loadu_ps(a + l * mp + i);
          c0 = StepV(c0, al, _mm256_set1_ps(v[l * 4]));
          c1 = StepV(c1, al, _mm256_set1_ps(v[l * 4 + 1]));
          c2 = StepV(c2, al, _mm256_set1_ps(v[l * 4 + 2]));
          c3 = StepV(c3, al, _mm256_set1_ps(v[l * 4 + 3]));
        }
        StoreC(c, rows, c0), StoreC(c + g.ldc, rows, c1);
        StoreC(c + 2 * g.ldc, rows, c2), StoreC(c + 3 * g.ldc, rows, c3);
        continue;
      }
      for (int64_t t = 0; t < nj; ++t) {
        __m256 c0 = LoadC(c + t * g.ldc, rows, zero);
        for (int64_t l = 0; l < g.k; ++l)
          c0 = StepV(c0, _mm256_loadu_ps(a + l * mp + i), _mm256_set1_ps(v[l * 4 + t]));
        StoreC(c + t * g.ldc, rows, c0);
      }
    }
  }
}

// Transposed A: row i of columns [j0, j0 + nj) from its eight chains' sums.
PARADIFF_AVX2 void FinishRow(const Bf16Gemm& g, __m256 sum, int64_t j0, int64_t nj, int64_t i) {
  float s[8];
  _mm256_storeu_ps(s, _mm256_mul_ps(_mm256_set1_ps(g.alpha), sum));
  for (int64_t t = 0; t < nj; ++t) {
    uint16_t& c = g.c[(j0 + t) * g.ldc + i];
    c = g.beta == 0.0f ? Narrow(s[t]) : Narrow(std::fma(Widen(c), g.beta, s[t]));
  }
}

// Transposed A, rows [i, i + 4) of columns [j0, j0 + nj), B's columns packed as eight lanes: four
// rows' chains in registers at once.
PARADIFF_AVX2 void FourRows(const Bf16Gemm& g, const float* packed, int64_t j0, int64_t nj,
                            int64_t i) {
  const uint16_t* a0 = g.a + i * g.lda;
  const uint16_t *a1 = a0 + g.lda, *a2 = a1 + g.lda, *a3 = a2 + g.lda;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int64_t l = 0; l < g.k; ++l) {
    const __m256 b = _mm256_loadu_ps(packed + l * 8);
    s0 = _mm256_fmadd_ps(_mm256_set1_ps(Widen(a0[l])), b, s0);
    s1 = _mm256_fmadd_ps(_mm256_set1_ps(Widen(a1[l])), b, s1);
    s2 = _mm256_fmadd_ps(_mm256_set1_ps(Widen(a2[l])), b, s2);
    s3 = _mm256_fmadd_ps(_mm256_set1_ps(Widen(a3[l])), b, s3);
  }
  FinishRow(g, s0, j0, nj, i), FinishRow(g, s1, j0, nj, i + 1);
  FinishRow(g, s2, j0, nj, i + 2), FinishRow(g, s3, j0, nj, i + 3);
}

PARADIFF_AVX2 void OneRow(const Bf16Gemm& g, const float* packed, int64_t j0, int64_t nj,
                          int64_t i) {
  const uint16_t* a = g.a + i * g.lda;
  __m256 s = _mm256_setzero_ps();
  for (int64_t l = 0; l < g.k; ++l)
    s = _mm256_fmadd_ps(_mm256_set1_ps(Widen(a[l])), _mm256_loadu_ps(packed + l * 8), s);
  FinishRow(g, s, j0, nj, i);
}

PARADIFF_AVX2 void TransposedA(const Bf16Gemm& g) {
  thread_local std::vector<float> packed;
  packed.resize(size_t(std::max<int64_t>(g.k, 1)) * 8);
  for (int64_t j0 = 0; j0 < g.n; j0 += 8) {
    const int64_t nj = std::min<int64_t>(8, g.n - j0);
    for (int64_t l = 0; l < g.k; ++l)
      for (int64_t t = 0; t < 8; ++t)
        packed[size_t(l * 8 + t)] = t < nj ? Widen(g.b[(j0 + t) * g.ldb + l]) : 0.0f;
    int64_t i = 0;
    for (; i + 4 <= g.m; i += 4) FourRows(g, packed.data(), j0, nj, i);
    for (; i < g.m; ++i) OneRow(g, packed.data(), j0, nj, i);
  }
}

void BothTransposed(const Bf16Gemm& g) {
  Scale(g);
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) {
      uint16_t& c = g.c[j * g.ldc + i];
      for (int64_t l = 0; l < g.k; ++l)
        c = Step(c, g.a[i * g.lda + l], Widen(g.b[l * g.ldb + j]) * g.alpha);
    }
}

// ATen's gemm dispatch: a DispatchStub whose only data is the kernel it chose for this CPU.
using GemmFn = at::native::cpublas::gemm_fn;
using Stub = std::remove_reference_t<decltype(at::native::cpublas::gemm_stub)>;
static_assert(std::is_standard_layout<Stub>::value &&
                  sizeof(Stub) == sizeof(at::native::DispatchStubImpl),
              "LibTorch's DispatchStub layout changed: see Note [Fast bf16 gemm]");

std::atomic<void*>& StubKernel() {
  return reinterpret_cast<at::native::DispatchStubImpl*>(&at::native::cpublas::gemm_stub)
      ->cpu_dispatch_ptr;
}

std::atomic<GemmFn> aten_kernel{nullptr};  // set once installed
std::atomic<int64_t> fast_calls{0};

at::native::TransposeType AtenTrans(GemmTrans t) {
  return t == GemmTrans::kYes ? at::native::TransposeType::Transpose
                              : at::native::TransposeType::NoTranspose;
}

// ATen's own kernel: the stub chooses it at its first bfloat16 gemm, which reaches the stub only
// with oneDNN off (see Note [No oneDNN]); nullptr otherwise.
GemmFn Original() {
  if (GemmFn f = aten_kernel.load()) return f;
  if (StubKernel().load() == nullptr) {
    const at::Tensor one = at::ones({2, 2}, at::TensorOptions().dtype(at::kBFloat16));
    at::mm(one, one);
  }
  return reinterpret_cast<GemmFn>(StubKernel().load());
}

void Call(GemmFn f, const Bf16Gemm& g) {
  f(at::kBFloat16, AtenTrans(g.ta), AtenTrans(g.tb), g.m, g.n, g.k, c10::Scalar(g.alpha), g.a,
    g.lda, g.b, g.ldb, c10::Scalar(g.beta), g.c, g.ldc);
}

// Whether [p, p + n) and [q, q + m) share an address.
bool Overlap(const uint16_t* p, int64_t n, const uint16_t* q, int64_t m) {
  return std::less<const uint16_t*>()(p, q + m) && std::less<const uint16_t*>()(q, p + n);
}

int64_t Span(int64_t ld, int64_t rows, int64_t cols) {
  return rows == 0 || cols == 0 ? 0 : ld * (cols - 1) + rows;
}

void Hooked(c10::ScalarType type, at::native::TransposeType ta, at::native::TransposeType tb,
            int64_t m, int64_t n, int64_t k, const c10::Scalar& alpha, const void* a, int64_t lda,
            const void* b, int64_t ldb, const c10::Scalar& beta, void* c, int64_t ldc) {
  using at::native::TransposeType;
  const GemmFn aten = aten_kernel.load(std::memory_order_relaxed);
  auto plain = [](TransposeType t) { return t != TransposeType::ConjTranspose; };
  Bf16Gemm g;
  g.ta = ta == TransposeType::Transpose ? GemmTrans::kYes : GemmTrans::kNo;
  g.tb = tb == TransposeType::Transpose ? GemmTrans::kYes : GemmTrans::kNo;
  g.m = m, g.n = n, g.k = k, g.lda = lda, g.ldb = ldb, g.ldc = ldc;
  g.a = static_cast<const uint16_t*>(a), g.b = static_cast<const uint16_t*>(b);
  g.c = static_cast<uint16_t*>(c);
  const int64_t c_span = Span(ldc, m, n);
  const bool ta_y = g.ta == GemmTrans::kYes, tb_y = g.tb == GemmTrans::kYes;
  if (type != at::kBFloat16 || !plain(ta) || !plain(tb) ||
      Overlap(g.c, c_span, g.a, Span(lda, ta_y ? k : m, ta_y ? m : k)) ||
      Overlap(g.c, c_span, g.b, Span(ldb, tb_y ? n : k, tb_y ? k : n)))
    return aten(type, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  g.alpha = alpha.to<float>();
  g.beta = beta.to<float>();
  FastBf16Gemm(g);
  fast_calls.fetch_add(1, std::memory_order_relaxed);
}

// Both kernels on every variant, shapes with and without vector tails, scalars that bfloat16
// holds and that it does not, and special values; true when every bit agrees.
bool ProbeMatches(GemmFn aten) {
  std::mt19937 rng(20261205);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float specials[] = {INFINITY, -INFINITY, NAN, 1e-39f, -0.0f, 3e38f, -3e38f, 0.0f};
  const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 2}, {17, 9, 33}, {8, 16, 4}, {43, 11, 19}};
  for (const auto& s : shapes)
    for (int variant = 0; variant < 4; ++variant)
      for (float alpha : {1.0f, 0.3f})
        for (float beta : {0.0f, 1.0f, 0.3f}) {
          Bf16Gemm g;
          g.ta = variant & 1 ? GemmTrans::kYes : GemmTrans::kNo;
          g.tb = variant & 2 ? GemmTrans::kYes : GemmTrans::kNo;
          g.m = s[0], g.n = s[1], g.k = s[2], g.alpha = alpha, g.beta = beta;
          const bool ta = g.ta == GemmTrans::kYes, tb = g.tb == GemmTrans::kYes;
          g.lda = (ta ? g.k : g.m) + 3, g.ldb = (tb ? g.n : g.k) + 1, g.ldc = g.m + 2;
          auto fill = [&](size_t n) {
            std::vector<uint16_t> v(n);
            for (size_t i = 0; i < n; ++i)
              v[i] = Narrow(i % 29 == 7 ? specials[(i / 29) % 8] : normal(rng));
            return v;
          };
          const std::vector<uint16_t> a = fill(size_t(g.lda * (ta ? g.m : g.k)));
          const std::vector<uint16_t> b = fill(size_t(g.ldb * (tb ? g.k : g.n)));
          std::vector<uint16_t> c1 = fill(size_t(g.ldc * g.n)), c2 = c1;
          g.a = a.data(), g.b = b.data(), g.c = c1.data();
          Call(aten, g);
          g.c = c2.data();
          FastBf16Gemm(g);
          if (c1 != c2) return false;
        }
  return true;
}

}  // namespace

bool FastBf16GemmSupported() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

void FastBf16Gemm(const Bf16Gemm& g) {
  if (g.ta == GemmTrans::kNo && g.tb == GemmTrans::kNo) return UntransposedA(g, 1, g.ldb);
  if (g.ta == GemmTrans::kNo) return UntransposedA(g, g.ldb, 1);
  if (g.tb == GemmTrans::kNo) return TransposedA(g);
  BothTransposed(g);
}

void StubBf16Gemm(const Bf16Gemm& g) {
  GemmFn f = reinterpret_cast<GemmFn>(StubKernel().load());
  Call(f != nullptr ? f : Original(), g);
}

void AtenBf16Gemm(const Bf16Gemm& g) {
  const GemmFn aten = Original();
  if (aten == nullptr)
    throw std::logic_error("AtenBf16Gemm: ATen's bf16 gemm is not known (oneDNN is on)");
  Call(aten, g);
}

int64_t InstalledBf16GemmCalls() { return fast_calls.load(std::memory_order_relaxed); }

bool InstallFastBf16Gemm() {
  static const bool installed = [] {
    if (!FastBf16GemmSupported()) return false;
    const GemmFn aten = Original();
    if (aten == nullptr || !ProbeMatches(aten)) return false;
    aten_kernel.store(aten);
    StubKernel().store(reinterpret_cast<void*>(&Hooked));
    return true;
  }();
  return installed;
}

ScopedAtenBf16Gemm::ScopedAtenBf16Gemm() : saved_(StubKernel().load()) {
  if (GemmFn aten = aten_kernel.load()) StubKernel().store(reinterpret_cast<void*>(aten));
}

ScopedAtenBf16Gemm::~ScopedAtenBf16Gemm() { StubKernel().store(saved_); }

}  // namespace paradiff
