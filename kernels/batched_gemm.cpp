#include "kernels/batched_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/native/CPUBlas.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <mutex>
#include <string>
#include <type_traits>

#include "kernels/bf16_gemm.h"

namespace paradiff {

// Note [Batched products from pointers]: LibTorch 1.13 multiplies batches of small matrices on the
// CPU (the attention's two products and their backward, through matmul and BmmBackward0) by
// splitting along the batch, without MKL or oneDNN (LinearAlgebra.cpp, bmm_out_or_baddbmm_): per
// batch item three `select`s (each an `as_strided`), a `resolve_conj` per operand and one
// cpublas::gemm call whose transposes and leading dimensions addmm_impl_cpu_ derives from the
// items' strides. Those views were about a fifth of a check's operator calls. BatchedGemm makes
// the same gemm calls in the same order from the tensors' pointers and strides, so every bit is
// ATen's, and hands every other case (ATen's naive loops below 400 multiply-adds per item, an
// MKL build, oneDNN on, empty or degenerate shapes, other dtypes, strides that need a copy) to
// ATen's own kernel. It is installed as the CPU kernel of aten::bmm, so autograd and matmul above
// it are unchanged. tests/unit/batched_gemm_test.cpp compares it with ATen's kernel.

namespace {

std::atomic<int64_t> g_split_calls{0};

// addmm_impl_cpu_'s choice for one operand of an item with sizes (s0, s1) and strides (t0, t1)
// when C is transposed or not: not transposed, transposed, or neither (a copy: not handled here).
enum class Layout { kNo, kYes, kCopy };
Layout OperandLayout(int64_t t0, int64_t t1, bool transpose_c, int64_t rows_needed,
                     int64_t cols_needed) {
  const int64_t first = transpose_c ? t1 : t0, second = transpose_c ? t0 : t1;
  if (first == 1 && second >= std::max<int64_t>(1, rows_needed)) return Layout::kNo;
  if (second == 1 && first >= std::max<int64_t>(1, cols_needed)) return Layout::kYes;
  return Layout::kCopy;
}

// cpublas::gemm as LibTorch 1.13 runs it for one dtype (CPUBlas.cpp; its overloads are not
// exported): the leading dimensions normalized (Normalized), then the BLAS's sgemm_ / dgemm_ where
// use_blas_gemm allows (BlasDims; BatchedGemm hands other shapes to ATen's kernel), and the gemm
// dispatch for bfloat16 (this build's BLAS has no sbgemm).
using BlasGemm = void (*)(const char*, const char*, const int*, const int*, const int*, const void*,
                          const void*, const int*, const void*, const int*, const void*, void*,
                          const int*);
struct Blas {
  BlasGemm sgemm = reinterpret_cast<BlasGemm>(::dlsym(RTLD_DEFAULT, "sgemm_"));
  BlasGemm dgemm = reinterpret_cast<BlasGemm>(::dlsym(RTLD_DEFAULT, "dgemm_"));
};
const Blas& TheBlas() {
  static const Blas blas;
  return blas;
}

struct GemmArgs {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
};

GemmArgs Normalized(GemmArgs g) {  // internal::normalize_last_dims
  if (g.n == 1) g.ldc = g.m;
  if (g.ta) {
    if (g.m == 1) g.lda = g.k;
  } else if (g.k == 1) {
    g.lda = g.m;
  }
  if (g.tb) {
    if (g.k == 1) g.ldb = g.n;
  } else if (g.n == 1) {
    g.ldb = g.k;
  }
  return g;
}

bool BlasDims(const GemmArgs& g) {  // use_blas_gemm
  return g.m <= INT_MAX && g.n <= INT_MAX && g.k <= INT_MAX && g.lda <= INT_MAX &&
         g.ldb <= INT_MAX && g.ldc <= INT_MAX && g.lda >= std::max<int64_t>(1, g.ta ? g.k : g.m) &&
         g.ldb >= std::max<int64_t>(1, g.tb ? g.n : g.k) && g.ldc >= std::max<int64_t>(1, g.m);
}

template <typename T>
void Gemm(const GemmArgs& g, const T* a, const T* b, T* c) {
  if constexpr (std::is_same_v<T, at::BFloat16>) {
    Bf16Gemm x;
    x.ta = g.ta ? GemmTrans::kYes : GemmTrans::kNo;
    x.tb = g.tb ? GemmTrans::kYes : GemmTrans::kNo;
    x.m = g.m, x.n = g.n, x.k = g.k, x.alpha = 1.0f, x.beta = 0.0f;
    x.a = reinterpret_cast<const uint16_t*>(a), x.lda = g.lda;
    x.b = reinterpret_cast<const uint16_t*>(b), x.ldb = g.ldb;
    x.c = reinterpret_cast<uint16_t*>(c), x.ldc = g.ldc;
    StubBf16Gemm(x);
  } else {
    const BlasGemm blas = std::is_same_v<T, float> ? TheBlas().sgemm : TheBlas().dgemm;
    const int m = int(g.m), n = int(g.n), k = int(g.k), lda = int(g.lda), ldb = int(g.ldb),
              ldc = int(g.ldc);
    const char ta = g.ta ? 't' : 'n', tb = g.tb ? 't' : 'n';
    const T alpha = 1, beta = 0;
    blas(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
  }
}

template <typename T>
void Items(const at::Tensor& m1, const at::Tensor& m2, at::Tensor& out, const GemmArgs& g) {
  const T* a = m1.data_ptr<T>();
  const T* b = m2.data_ptr<T>();
  T* c = out.data_ptr<T>();
  const int64_t sa = m1.stride(0), sb = m2.stride(0), sc = out.stride(0);
  for (int64_t i = 0; i < out.size(0); ++i) Gemm<T>(g, a + i * sa, b + i * sb, c + i * sc);
}

}  // namespace

at::Tensor BatchedGemm(const at::Tensor& batch1, const at::Tensor& batch2) {
  const auto dtype = batch1.scalar_type();
  const bool handled_dtype = dtype == at::kFloat || dtype == at::kDouble || dtype == at::kBFloat16;
  if (!handled_dtype || batch2.scalar_type() != dtype || batch1.dim() != 3 || batch2.dim() != 3 ||
      !batch1.is_cpu() || !batch2.is_cpu() || batch1.is_conj() || batch2.is_conj() ||
      batch1.size(0) != batch2.size(0) || batch1.size(2) != batch2.size(1) ||
      at::globalContext().userEnabledMkldnn() || (at::hasMKL() && dtype != at::kBFloat16) ||
      (dtype != at::kBFloat16 && (!TheBlas().sgemm || !TheBlas().dgemm)))
    return at::cpu::bmm(batch1, batch2);
  const int64_t bs = batch1.size(0), rows = batch1.size(1), inner = batch1.size(2),
                cols = batch2.size(2);
  if (bs == 0 || rows == 0 || cols == 0 || inner == 0 || inner * rows * cols < 400)
    return at::cpu::bmm(batch1, batch2);
  // The result as the structured kernel allocates it: contiguous, each item [rows, cols] with
  // strides (cols, 1). addmm_impl_cpu_ takes such a C as it is when it has one column, and
  // transposed (swapping the operands) otherwise.
  at::Tensor out = at::empty({bs, rows, cols}, batch1.options());
  const bool transpose_c = cols != 1;
  const at::Tensor& m1 = transpose_c ? batch2 : batch1;
  const at::Tensor& m2 = transpose_c ? batch1 : batch2;
  const int64_t m = transpose_c ? cols : rows, n = transpose_c ? rows : cols;
  const int64_t k = transpose_c ? m1.size(1) : m1.size(2);
  const Layout la = OperandLayout(m1.stride(1), m1.stride(2), transpose_c, m, k);
  const Layout lb = OperandLayout(m2.stride(1), m2.stride(2), transpose_c, k, n);
  if (la == Layout::kCopy || lb == Layout::kCopy) return at::cpu::bmm(batch1, batch2);
  GemmArgs g;
  g.ta = la == Layout::kYes, g.tb = lb == Layout::kYes;
  g.m = m, g.n = n, g.k = k;
  g.lda = (g.ta == transpose_c) ? m1.stride(2) : m1.stride(1);
  g.ldb = (g.tb == transpose_c) ? m2.stride(2) : m2.stride(1);
  g.ldc = transpose_c ? cols : 1;
  g = Normalized(g);
  if (dtype != at::kBFloat16 && !BlasDims(g)) return at::cpu::bmm(batch1, batch2);
  switch (dtype) {
    case at::kFloat:
      Items<float>(m1, m2, out, g);
      break;
    case at::kDouble:
      Items<double>(m1, m2, out, g);
      break;
    default:
      Items<at::BFloat16>(m1, m2, out, g);
      break;
  }
  g_split_calls.fetch_add(1, std::memory_order_relaxed);
  return out;
}

void InstallBatchedGemm() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Replacing a kernel LibTorch registered makes the dispatcher warn once; this is on purpose.
    struct Quiet : c10::WarningHandler {
      void process(const c10::SourceLocation&, const std::string&, const bool) override {}
    } quiet;
    c10::Warning::WarningHandlerGuard guard(&quiet);
    static auto* library =
        new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    library->impl("bmm", TORCH_FN(BatchedGemm));
  });
}

int64_t BatchedGemmSplitCalls() { return g_split_calls.load(std::memory_order_relaxed); }

}  // namespace paradiff
