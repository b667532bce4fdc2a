// LibTorch's CPU gemm for bfloat16, the same bits faster (see Note [Fast bf16 gemm] in
// bf16_gemm.cpp).
#pragma once

#include <cstdint>

namespace paradiff {

// Whether an operand is read transposed (column-major, BLAS conventions, as ATen's gemm takes it).
enum class GemmTrans { kNo, kYes };

// The arguments of one gemm on bfloat16 bits: C = alpha * op(A) op(B) + beta * C, column-major,
// C m x n, op(A) m x k, op(B) k x n.
struct Bf16Gemm {
  GemmTrans ta = GemmTrans::kNo, tb = GemmTrans::kNo;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const uint16_t* a = nullptr;
  int64_t lda = 1;
  const uint16_t* b = nullptr;
  int64_t ldb = 1;
  uint16_t* c = nullptr;
  int64_t ldc = 1;
};

// Whether this CPU runs FastBf16Gemm (AVX2 and FMA).
bool FastBf16GemmSupported();

// The bits LibTorch 1.13's own bfloat16 gemm writes (ATen's BlasKernel.cpp, built with fused
// multiply-adds), faster. Only where FastBf16GemmSupported().
void FastBf16Gemm(const Bf16Gemm& g);

// ATen's own kernel for the same arguments (the one InstallFastBf16Gemm replaces). Needs oneDNN
// off (MakeNumerics turns it off); throws std::logic_error otherwise.
void AtenBf16Gemm(const Bf16Gemm& g);

// Sends this process's bfloat16 CPU gemms to FastBf16Gemm when the CPU supports it and a probe
// finds it bit for bit equal to ATen's kernel on this machine; returns whether they go there now.
// Once per process; any thread.
bool InstallFastBf16Gemm();

// The bfloat16 gemm ATen's dispatch (cpublas::gemm_stub) runs in this process now: the fast
// kernel where installed, else ATen's own. Needs oneDNN off, as AtenBf16Gemm.
void StubBf16Gemm(const Bf16Gemm& g);

// How many gemms the installed kernel has run in this process.
int64_t InstalledBf16GemmCalls();

// While alive, bfloat16 gemms run ATen's own kernel again (benchmarks and tests compare the two).
// Not for use while other threads compute.
class ScopedAtenBf16Gemm {
 public:
  ScopedAtenBf16Gemm();
  ~ScopedAtenBf16Gemm();
  ScopedAtenBf16Gemm(const ScopedAtenBf16Gemm&) = delete;
  ScopedAtenBf16Gemm& operator=(const ScopedAtenBf16Gemm&) = delete;

 private:
  void* saved_;
};

}  // namespace paradiff
