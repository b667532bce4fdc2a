#include "kernels/numerics.h"

#include <ATen/ATen.h>
#include <dlfcn.h>

#include <mutex>

namespace paradiff {

namespace {

// Note [No oneDNN]: LibTorch sends bf16 matmuls (linear, addmm, bmm) on an AVX-512 CPU to oneDNN
// (Debian's libdnnl 2.6.3), which JIT-compiles a brgemm kernel for every new shape. In a
// long-lived process that has already run a few hundred configs of many shapes (a campaign
// worker), compiling one more kernel occasionally works from a corrupted description and kills
// the worker (std::bad_alloc, std::bad_array_new_length or SIGSEGV inside brgemm_kernel_create),
// while the same config passes in a fresh process. Without oneDNN, bf16 matmuls run in ATen's own
// CPU gemm (fp32 accumulation). Turned off once per process, before the first forward, by the one
// factory of the arithmetic that the engine and the reference both use, so the two always run the
// same kernels. Evidence: docs/EVIDENCE.md.
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

at::Tensor Numerics::Round(const at::Tensor& t) const {
  if (!emulate_fp16) return t;
  return t.to(at::kHalf).to(at::kFloat);
}

at::Tensor Numerics::In(const at::Tensor& t) const {
  if (emulate_fp16) return Round(t.to(at::kFloat));
  return t.scalar_type() == exec ? t : t.to(exec);
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

}  // namespace paradiff
